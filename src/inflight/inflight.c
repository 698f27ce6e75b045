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
 *                      [--executions E] [--separate] [--secondary]
 *                      [--draw-kib V] [--queues Q] [--free-pending]
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
 * --executions E runs every command buffer E times: it is submitted E times
 * in one vkQueueSubmit (with --separate, in E of them, without a wait in
 * between), recorded with SIMULTANEOUS_USE when E > 1. With --secondary the
 * dispatches are recorded into a secondary command buffer instead, which
 * the primary executes E times with one vkCmdExecuteCommands.
 * --draw-kib V records, before the dispatches, a render pass with a draw
 * whose vertex shader spills a V KiB private array. --queues Q creates the
 * device with Q queues of family 0 (more than panvk exposes: invalid usage,
 * run it without --validate). --free-pending frees the first command buffer
 * once every command buffer is submitted, before vkQueueWaitIdle (invalid
 * usage too: it is pending), and then creates and destroys a 5 MiB buffer,
 * so that a log of the VM bindings shows what the free unbound before the
 * wait.
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
#include "flat_spv.h"
#include "shared_spv.h"
#include "spill_spv.h"
#include "spill_vs_spv.h"

/* A render pass over a 64x64 colour image with one pipeline, whose vertex
 * shader spills (--draw-kib).
 */
struct draw {
   struct mf_image img;
   VkRenderPass pass;
   VkFramebuffer fb;
   VkPipelineLayout layout;
   VkPipeline pipe;
};

static VkShaderModule
shader_module(struct mf_device *d, const uint32_t *spv, size_t size)
{
   VkShaderModuleCreateInfo smci = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = size,
      .pCode = spv,
   };
   VkShaderModule sm;
   MF_CHECK(vkCreateShaderModule(d->dev, &smci, NULL, &sm));
   return sm;
}

static void
draw_create(struct mf_device *d, unsigned kib, struct draw *g)
{
   const VkFormat format = VK_FORMAT_R8G8B8A8_UNORM;
   mf_image_2d_create(d, 64, 64, format, VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT,
                      &g->img);
   VkAttachmentDescription att = {
      .format = format,
      .samples = VK_SAMPLE_COUNT_1_BIT,
      .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
      .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
      .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
      .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
      .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
      .finalLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
   };
   VkAttachmentReference ref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
   VkSubpassDescription sub = {
      .pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
      .colorAttachmentCount = 1,
      .pColorAttachments = &ref,
   };
   VkRenderPassCreateInfo rpci = {
      .sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
      .attachmentCount = 1,
      .pAttachments = &att,
      .subpassCount = 1,
      .pSubpasses = &sub,
   };
   MF_CHECK(vkCreateRenderPass(d->dev, &rpci, NULL, &g->pass));
   VkFramebufferCreateInfo fci = {
      .sType = VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO,
      .renderPass = g->pass,
      .attachmentCount = 1,
      .pAttachments = &g->img.view,
      .width = 64,
      .height = 64,
      .layers = 1,
   };
   MF_CHECK(vkCreateFramebuffer(d->dev, &fci, NULL, &g->fb));
   VkPipelineLayoutCreateInfo plci = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
   };
   MF_CHECK(vkCreatePipelineLayout(d->dev, &plci, NULL, &g->layout));

   uint32_t words = kib * 256;
   VkSpecializationMapEntry entry = {0, 0, sizeof(words)};
   VkSpecializationInfo spec = {1, &entry, sizeof(words), &words};
   VkShaderModule vs = shader_module(d, spill_vs_spv, sizeof(spill_vs_spv));
   VkShaderModule fs = shader_module(d, flat_spv, sizeof(flat_spv));
   VkPipelineShaderStageCreateInfo stages[2] = {
      {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
       .stage = VK_SHADER_STAGE_VERTEX_BIT,
       .module = vs,
       .pName = "main",
       .pSpecializationInfo = &spec},
      {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
       .stage = VK_SHADER_STAGE_FRAGMENT_BIT,
       .module = fs,
       .pName = "main"},
   };
   VkPipelineVertexInputStateCreateInfo vi = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
   };
   VkPipelineInputAssemblyStateCreateInfo ia = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
      .topology = VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST,
   };
   VkViewport vp = {0, 0, 64, 64, 0, 1};
   VkRect2D scissor = {{0, 0}, {64, 64}};
   VkPipelineViewportStateCreateInfo vps = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
      .viewportCount = 1,
      .pViewports = &vp,
      .scissorCount = 1,
      .pScissors = &scissor,
   };
   VkPipelineRasterizationStateCreateInfo rs = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
      .polygonMode = VK_POLYGON_MODE_FILL,
      .cullMode = VK_CULL_MODE_NONE,
      .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
      .lineWidth = 1.0f,
   };
   VkPipelineMultisampleStateCreateInfo ms = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
      .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT,
   };
   VkPipelineColorBlendAttachmentState cba = {.colorWriteMask = 0xf};
   VkPipelineColorBlendStateCreateInfo cb = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
      .attachmentCount = 1,
      .pAttachments = &cba,
   };
   VkGraphicsPipelineCreateInfo gpci = {
      .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
      .stageCount = 2,
      .pStages = stages,
      .pVertexInputState = &vi,
      .pInputAssemblyState = &ia,
      .pViewportState = &vps,
      .pRasterizationState = &rs,
      .pMultisampleState = &ms,
      .pColorBlendState = &cb,
      .layout = g->layout,
      .renderPass = g->pass,
   };
   MF_CHECK(vkCreateGraphicsPipelines(d->dev, VK_NULL_HANDLE, 1, &gpci, NULL,
                                      &g->pipe));
   vkDestroyShaderModule(d->dev, vs, NULL);
   vkDestroyShaderModule(d->dev, fs, NULL);
}

static void
draw_record(VkCommandBuffer cmd, const struct draw *g)
{
   VkClearValue clear = {.color.float32 = {0, 0, 0, 1}};
   VkRenderPassBeginInfo rbi = {
      .sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO,
      .renderPass = g->pass,
      .framebuffer = g->fb,
      .renderArea = {{0, 0}, {64, 64}},
      .clearValueCount = 1,
      .pClearValues = &clear,
   };
   vkCmdBeginRenderPass(cmd, &rbi, VK_SUBPASS_CONTENTS_INLINE);
   vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, g->pipe);
   vkCmdDraw(cmd, 3, 1, 0, 0);
   vkCmdEndRenderPass(cmd);
}

static void
draw_destroy(struct mf_device *d, struct draw *g)
{
   vkDestroyPipeline(d->dev, g->pipe, NULL);
   vkDestroyPipelineLayout(d->dev, g->layout, NULL);
   vkDestroyFramebuffer(d->dev, g->fb, NULL);
   vkDestroyRenderPass(d->dev, g->pass, NULL);
   mf_image_destroy(d, &g->img);
}

/* mf_device_create() with `queues` queues of family 0. */
static void
device_create_queues(struct mf_device *d, VkPhysicalDevice pd, unsigned queues)
{
   float prio[8] = {1, 1, 1, 1, 1, 1, 1, 1};
   VkDeviceQueueCreateInfo qci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = 0,
      .queueCount = queues,
      .pQueuePriorities = prio,
   };
   VkDeviceCreateInfo dci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &qci,
   };
   memset(d, 0, sizeof(*d));
   d->pd = pd;
   MF_CHECK(vkCreateDevice(pd, &dci, NULL, &d->dev));
   vkGetDeviceQueue(d->dev, 0, 0, &d->queue);
   vkGetPhysicalDeviceMemoryProperties(pd, &d->mp);
   VkCommandPoolCreateInfo pci = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
      .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
   };
   MF_CHECK(vkCreateCommandPool(d->dev, &pci, NULL, &d->pool));
}

int
main(int argc, char **argv)
{
   unsigned n = 12, dispatches = 1, groups = 64, groups_y = 1, tls_kib = 16;
   unsigned local_size = 256, shared_kib = 32, rerecord = 0, epoch = 1;
   bool validate = false, do_submit = false, barriers = false, grow = false;
   bool host_barriers = false, shrink = false, mixed = false;
   bool gfx_barriers = false, indirect = false, simultaneous = false;
   bool mark = false, reset_pool = false, separate = false, secondary = false;
   bool free_pending = false;
   unsigned executions = 1, draw_kib = 0, queues = 1;
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
      else if (!strcmp(argv[i], "--separate"))
         separate = true;
      else if (!strcmp(argv[i], "--secondary"))
         secondary = true;
      else if (!strcmp(argv[i], "--free-pending"))
         free_pending = true;
      else if (!strcmp(argv[i], "--executions") && i + 1 < argc)
         executions = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--draw-kib") && i + 1 < argc)
         draw_kib = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--queues") && i + 1 < argc)
         queues = strtoul(argv[++i], NULL, 10);
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
       epoch == 0 || executions == 0 || executions > 16 || draw_kib > 64 ||
       queues == 0 || queues > 8 || (secondary && draw_kib) ||
       (separate && secondary) || (free_pending && !do_submit) ||
       grow + shrink + mixed > 1 || barriers + host_barriers + gfx_barriers > 1) {
      fprintf(stderr, "usage: mesa-fork-inflight [--validate] [--submit] "
                      "[--cmdbufs N] [--dispatches D] [--groups G] "
                      "[--groups-y Y] [--tls-kib K] [--local-size L] "
                      "[--shared-kib S] [--barrier] [--host-barrier] "
                      "[--tls-grow] [--tls-shrink] [--tls-mixed] "
                      "[--rerecord R] [--graphics-barrier] [--epoch E] [--indirect] "
                      "[--simultaneous] [--mark] [--reset-pool] "
                      "[--executions E] [--separate] [--secondary] "
                      "[--draw-kib V] [--queues Q] [--free-pending] "
                      "tls|wls|both\n");
      return 64;
   }
   bool tls = !strcmp(kind, "tls"), both = !strcmp(kind, "both");

   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-inflight", validate));
   struct mf_device d;
   VkPhysicalDevice pd = mf_first_physical_device(&mi, "mesa-fork-inflight");
   if (queues > 1)
      device_create_queues(&d, pd, queues);
   else
      mf_device_create(&d, pd, NULL);
   struct mf_buffer buf;
   mf_buffer_create(&d, 1 << 20, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0,
                    &buf);
   struct draw g;
   if (draw_kib)
      draw_create(&d, draw_kib, &g);
   if (executions > 1)
      simultaneous = true;

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
   VkCommandBuffer *secs = calloc(n, sizeof(*secs));
   VkCommandBuffer execs[16];
   unsigned ok = 0, oom = 0, other = 0;
   for (unsigned round = 0; round <= rerecord; round++) {
      for (unsigned i = 0; i < n; i++) {
         uint32_t words = 1 << 18;
         VkCommandBufferUsageFlags usage =
            simultaneous ? VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT : 0;
         if (round == 0) {
            cmds[i] = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, usage);
            if (secondary)
               secs[i] = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_SECONDARY, usage);
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
            if (secondary) {
               VkCommandBufferInheritanceInfo inh = {
                  .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO,
               };
               bi.pInheritanceInfo = &inh;
               if (!reset_pool)
                  MF_CHECK(vkResetCommandBuffer(secs[i], 0));
               MF_CHECK(vkBeginCommandBuffer(secs[i], &bi));
            }
         }
         /* Where the dispatches go. */
         VkCommandBuffer rec = secondary ? secs[i] : cmds[i];
         if (draw_kib)
            draw_record(rec, &g);
         c.pipe = pipes[grow || shrink ? i : 0];
         mf_compute_bind(rec, &c, &words, sizeof(words));
         for (unsigned k = 0; k < dispatches; k++) {
            if (mixed) {
               c.pipe = pipes[k];
               mf_compute_bind(rec, &c, &words, sizeof(words));
            }
            bool seam = k && k % epoch == 0;
            if (barriers && seam) {
               mf_barrier(rec, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_ACCESS_SHADER_READ_BIT);
            }
            if (host_barriers && seam) {
               mf_barrier(rec, VK_PIPELINE_STAGE_HOST_BIT,
                          VK_ACCESS_HOST_WRITE_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_ACCESS_SHADER_READ_BIT);
            }
            if (gfx_barriers && seam) {
               mf_barrier(rec, VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
                          VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
                          VK_ACCESS_SHADER_READ_BIT);
            }
            if (indirect)
               vkCmdDispatchIndirect(rec, grid.buf, 0);
            else
               vkCmdDispatch(rec, groups, groups_y, 1);
         }
         VkResult r = VK_SUCCESS;
         if (secondary) {
            r = vkEndCommandBuffer(secs[i]);
            for (unsigned e = 0; e < executions; e++)
               execs[e] = secs[i];
            if (r == VK_SUCCESS)
               vkCmdExecuteCommands(cmds[i], executions, execs);
         }
         VkResult rp = vkEndCommandBuffer(cmds[i]);
         if (r == VK_SUCCESS)
            r = rp;
         ok += r == VK_SUCCESS;
         oom += r == VK_ERROR_OUT_OF_DEVICE_MEMORY;
         other += r != VK_SUCCESS && r != VK_ERROR_OUT_OF_DEVICE_MEMORY;
         printf("{\"cmdbuf\": %u, \"round\": %u, \"end\": \"%s\"}\n", i, round,
                mf_result_str(r));
         if (r == VK_SUCCESS && do_submit) {
            /* A secondary runs E times inside its primary; a primary runs
             * E times here.
             */
            unsigned runs = secondary ? 1 : executions;
            unsigned per_submit = separate ? 1 : runs;
            for (unsigned e = 0; e < runs; e++)
               execs[e] = cmds[i];
            for (unsigned e = 0; e < runs; e += per_submit) {
               VkSubmitInfo si = {
                  .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                  .commandBufferCount = per_submit,
                  .pCommandBuffers = execs,
               };
               MF_CHECK(vkQueueSubmit(d.queue, 1, &si, VK_NULL_HANDLE));
            }
         }
      }
      if (do_submit && free_pending && round == rerecord && cmds[0]) {
         vkFreeCommandBuffers(d.dev, d.pool, 1, &cmds[0]);
         cmds[0] = VK_NULL_HANDLE;
         struct mf_buffer m;
         mf_buffer_create(&d, 5 << 20, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1,
                          0, &m);
         mf_buffer_destroy(&d, &m);
      }
      if (do_submit)
         MF_CHECK(vkQueueWaitIdle(d.queue));
   }

   vkFreeCommandBuffers(d.dev, d.pool, n, cmds);
   if (secondary)
      vkFreeCommandBuffers(d.dev, d.pool, n, secs);
   free(cmds);
   free(secs);
   if (draw_kib)
      draw_destroy(&d, &g);
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
