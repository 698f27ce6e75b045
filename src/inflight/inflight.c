/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-inflight: records N command buffers that all stay alive, the way
 * a pipelined inference graph keeps several in flight, each with D dispatches
 * of a shader that needs scratch memory, and reports what vkEndCommandBuffer
 * returned for each. With --submit they are also submitted and waited on.
 *
 *   mesa-fork-inflight [--validate] [--submit] [--cmdbufs N]
 *                      [--dispatches D] [--groups G] [--groups-y Y]
 *                      [--tls-kib K] [--local-size L] [--shared-kib S]
 *                      [--barrier] [--host-barrier] [--tls-grow]
 *                      [--tls-shrink] [--tls-mixed] [--rerecord R]
 *                      [--graphics-barrier] [--epoch E] [--indirect]
 *                      [--simultaneous] [--mark] [--reset-pool]
 *                      tls|wls|both
 *
 * --barrier puts a compute-to-compute pipeline barrier between dispatches,
 * --host-barrier a host-to-compute one, which orders no compute work, and
 * --graphics-barrier a fragment-to-fragment one, which orders no compute
 * work either. With --epoch E the barrier comes after every E dispatches
 * instead of after each. --indirect dispatches with vkCmdDispatchIndirect (the grid in
 * a host-written buffer), --simultaneous records with
 * VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT. --mark creates and destroys
 * a 5 MiB buffer once the command buffers are freed, so that a log of the
 * kernel's VM bindings shows what the device still holds at that point.
 * --tls-grow gives command buffer i a shader needing (i + 1) * K KiB, so
 * that each one needs more TLS than the one before; --tls-shrink gives it
 * (N - i) * K KiB, so that each one needs less. --tls-mixed gives dispatch k
 * of every command buffer a shader needing (k + 1) * K KiB, so that the jobs
 * of one command buffer need different amounts. --rerecord R then resets
 * every command buffer with vkResetCommandBuffer and records (and with
 * --submit submits and waits on) it again, R more times; with --reset-pool
 * one vkResetCommandPool resets them all instead.
 *
 *   tls   a shader spilling a K KiB (default 16) private array per thread
 *   wls   a shader with S KiB (default 32) of workgroup-shared memory (WLS)
 *         and L (default 256) invocations per workgroup
 *   both  a shader with both: the K KiB private array and the S KiB of
 *         shared memory, L invocations per workgroup
 *
 * Each dispatch is G x Y x 1 workgroups (default 64 x 1).
 *
 * Prints one JSON line per command buffer, then a summary line.
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_vk.h"

#include "both_spv.h"
#include "shared_spv.h"
#include "spill_spv.h"

int
main(int argc, char **argv)
{
   unsigned n = 12, dispatches = 1, groups = 64, groups_y = 1, tls_kib = 16;
   unsigned local_size = 256, shared_kib = 32, rerecord = 0, epoch = 1;
   bool validate = false, do_submit = false, barriers = false, grow = false;
   bool host_barriers = false, shrink = false, mixed = false;
   bool gfx_barriers = false, indirect = false, simultaneous = false;
   bool mark = false, reset_pool = false;
   const char *kind = NULL;
   for (int i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--validate"))
         validate = true;
      else if (!strcmp(argv[i], "--submit"))
         do_submit = true;
      else if (!strcmp(argv[i], "--barrier"))
         barriers = true;
      else if (!strcmp(argv[i], "--host-barrier"))
         host_barriers = true;
      else if (!strcmp(argv[i], "--graphics-barrier"))
         gfx_barriers = true;
      else if (!strcmp(argv[i], "--indirect"))
         indirect = true;
      else if (!strcmp(argv[i], "--simultaneous"))
         simultaneous = true;
      else if (!strcmp(argv[i], "--mark"))
         mark = true;
      else if (!strcmp(argv[i], "--reset-pool"))
         reset_pool = true;
      else if (!strcmp(argv[i], "--tls-grow"))
         grow = true;
      else if (!strcmp(argv[i], "--tls-shrink"))
         shrink = true;
      else if (!strcmp(argv[i], "--tls-mixed"))
         mixed = true;
      else if (!strcmp(argv[i], "--cmdbufs") && i + 1 < argc)
         n = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--dispatches") && i + 1 < argc)
         dispatches = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--groups") && i + 1 < argc)
         groups = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--groups-y") && i + 1 < argc)
         groups_y = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--epoch") && i + 1 < argc)
         epoch = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--rerecord") && i + 1 < argc)
         rerecord = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--tls-kib") && i + 1 < argc)
         tls_kib = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--local-size") && i + 1 < argc)
         local_size = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--shared-kib") && i + 1 < argc)
         shared_kib = strtoul(argv[++i], NULL, 10);
      else if (!kind && (!strcmp(argv[i], "tls") || !strcmp(argv[i], "wls") ||
                         !strcmp(argv[i], "both")))
         kind = argv[i];
      else
         kind = NULL, argc = 0;
   }
   /* Larger sizes are the device's limits to check, not this client's. */
   if (!kind || n == 0 || n > 1024 || dispatches == 0 || groups == 0 ||
       groups_y == 0 || tls_kib == 0 || tls_kib > 256 || local_size == 0 ||
       local_size > 1024 || shared_kib == 0 || shared_kib > 64 || rerecord > 64 ||
       epoch == 0 ||
       grow + shrink + mixed > 1 || barriers + host_barriers + gfx_barriers > 1) {
      fprintf(stderr, "usage: mesa-fork-inflight [--validate] [--submit] "
                      "[--cmdbufs N] [--dispatches D] [--groups G] "
                      "[--groups-y Y] [--tls-kib K] [--local-size L] "
                      "[--shared-kib S] [--barrier] [--host-barrier] "
                      "[--tls-grow] [--tls-shrink] [--tls-mixed] "
                      "[--rerecord R] [--graphics-barrier] [--epoch E] [--indirect] "
                      "[--simultaneous] [--mark] [--reset-pool] "
                      "tls|wls|both\n");
      return 64;
   }
   bool tls = !strcmp(kind, "tls"), both = !strcmp(kind, "both");

   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-inflight", validate));
   struct mf_device d;
   mf_device_create(&d, mf_first_physical_device(&mi, "mesa-fork-inflight"),
                    NULL);
   struct mf_buffer buf;
   mf_buffer_create(&d, 1 << 20, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0,
                    &buf);

   struct mf_buffer grid;
   if (indirect) {
      mf_buffer_create(&d, sizeof(VkDispatchIndirectCommand),
                       VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT, -1,
                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                          VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                       &grid);
      VkDispatchIndirectCommand *cmd;
      MF_CHECK(vkMapMemory(d.dev, grid.mem, 0, sizeof(*cmd), 0, (void **)&cmd));
      *cmd = (VkDispatchIndirectCommand){groups, groups_y, 1};
      vkUnmapMemory(d.dev, grid.mem);
   }

   /* One pipeline per command buffer with --tls-grow or --tls-shrink, one
    * per dispatch with --tls-mixed, else one for all.
    */
   const uint32_t *spv = tls ? spill_spv : both ? both_spv : shared_spv;
   size_t spv_size = tls    ? sizeof(spill_spv)
                     : both ? sizeof(both_spv)
                            : sizeof(shared_spv);
   unsigned npipes = grow || shrink ? n : mixed ? dispatches : 1;
   VkPipeline *pipes = calloc(npipes, sizeof(*pipes));
   struct mf_compute c = {0};
   for (unsigned p = 0; p < npipes; p++) {
      uint32_t priv_words = tls_kib * 256 * (shrink ? n - p : p + 1);
      VkSpecializationMapEntry entry = {0, 0, sizeof(priv_words)};
      VkSpecializationInfo spec = {1, &entry, sizeof(priv_words), &priv_words};
      uint32_t consts[3] = {priv_words, local_size, shared_kib * 256};
      VkSpecializationMapEntry entries[3] = {
         {0, 0, sizeof(uint32_t)},
         {1, sizeof(uint32_t), sizeof(uint32_t)},
         {2, 2 * sizeof(uint32_t), sizeof(uint32_t)},
      };
      /* wls: constants 1 and 2 (spill's 0 is not in the shader). */
      VkSpecializationMapEntry wls_entries[2] = {
         {1, 0, sizeof(uint32_t)},
         {2, sizeof(uint32_t), sizeof(uint32_t)},
      };
      VkSpecializationInfo wls_spec = {2, wls_entries, 2 * sizeof(uint32_t),
                                       consts + 1};
      VkSpecializationInfo both_spec = {3, entries, sizeof(consts), consts};
      if (both)
         spec = both_spec;
      else if (!tls)
         spec = wls_spec;
      pipes[p] = mf_compute_variant(&d, spv, spv_size, 4, buf.buf, &spec, &c);
   }

   VkCommandBuffer *cmds = calloc(n, sizeof(*cmds));
   unsigned ok = 0, oom = 0, other = 0;
   for (unsigned round = 0; round <= rerecord; round++) {
      for (unsigned i = 0; i < n; i++) {
         uint32_t words = 1 << 18;
         VkCommandBufferUsageFlags usage =
            simultaneous ? VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT : 0;
         if (round == 0) {
            cmds[i] = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, usage);
         } else {
            VkCommandBufferBeginInfo bi = {
               .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
               .flags = usage,
            };
            if (!reset_pool)
               MF_CHECK(vkResetCommandBuffer(cmds[i], 0));
            else if (i == 0)
               MF_CHECK(vkResetCommandPool(d.dev, d.pool, 0));
            MF_CHECK(vkBeginCommandBuffer(cmds[i], &bi));
         }
         c.pipe = pipes[grow || shrink ? i : 0];
         mf_compute_bind(cmds[i], &c, &words, sizeof(words));
         for (unsigned k = 0; k < dispatches; k++) {
            if (mixed) {
               c.pipe = pipes[k];
               mf_compute_bind(cmds[i], &c, &words, sizeof(words));
            }
            bool seam = k && k % epoch == 0;
            if (barriers && seam) {
               mf_barrier(cmds[i], VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_ACCESS_SHADER_READ_BIT);
            }
            if (host_barriers && seam) {
               mf_barrier(cmds[i], VK_PIPELINE_STAGE_HOST_BIT,
                          VK_ACCESS_HOST_WRITE_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_ACCESS_SHADER_READ_BIT);
            }
            if (gfx_barriers && seam) {
               mf_barrier(cmds[i], VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
                          VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
                          VK_ACCESS_SHADER_READ_BIT);
            }
            if (indirect)
               vkCmdDispatchIndirect(cmds[i], grid.buf, 0);
            else
               vkCmdDispatch(cmds[i], groups, groups_y, 1);
         }
         VkResult r = vkEndCommandBuffer(cmds[i]);
         ok += r == VK_SUCCESS;
         oom += r == VK_ERROR_OUT_OF_DEVICE_MEMORY;
         other += r != VK_SUCCESS && r != VK_ERROR_OUT_OF_DEVICE_MEMORY;
         printf("{\"cmdbuf\": %u, \"round\": %u, \"end\": \"%s\"}\n", i, round,
                mf_result_str(r));
         if (r == VK_SUCCESS && do_submit) {
            VkSubmitInfo si = {
               .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
               .commandBufferCount = 1,
               .pCommandBuffers = &cmds[i],
            };
            MF_CHECK(vkQueueSubmit(d.queue, 1, &si, VK_NULL_HANDLE));
         }
      }
      if (do_submit)
         MF_CHECK(vkQueueWaitIdle(d.queue));
   }

   vkFreeCommandBuffers(d.dev, d.pool, n, cmds);
   free(cmds);
   if (mark) {
      struct mf_buffer m;
      mf_buffer_create(&d, 5 << 20, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0,
                       &m);
      mf_buffer_destroy(&d, &m);
   }
   for (unsigned p = 1; p < npipes; p++)
      vkDestroyPipeline(d.dev, pipes[p], NULL);
   c.pipe = pipes[0];
   free(pipes);
   mf_compute_destroy(&d, &c);
   mf_buffer_destroy(&d, &buf);
   if (indirect)
      mf_buffer_destroy(&d, &grid);
   mf_device_destroy(&d);
   unsigned messages = mi.messages;
   mf_instance_destroy(&mi);
   printf("{\"summary\": true, \"ok\": %u, \"out_of_device_memory\": %u, "
          "\"other\": %u, \"validation_messages\": %u}\n",
          ok, oom, other, messages);
   return messages ? 3 : other ? 1 : 0;
}
