/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-tls-secondary: which command buffers take the device-shared TLS
 * buffer, and for what need, when secondaries are executed by primaries.
 * Shaders spilling 1, 4 and 8 KiB private arrays (4, 16 and 32 KiB per
 * thread on a Valhall GPU: 152, 608 and 1216 MiB on the G610 model):
 *
 *   S   secondary, the 4 KiB shader: the shared buffer is created for it
 *   C   primary,   the 8 KiB shader: a larger buffer replaces S's
 *   P1  primary executing S only: no job of its own uses TLS, so it takes
 *       no buffer (it would keep C's alive, and make the next need C's)
 *   C is reset: nobody holds the larger buffer, the device drops it
 *   P2  primary executing S only: creates nothing (S's jobs use S's buffer)
 *   Q   primary, the 1 KiB shader, then executing S: its own need is 4 KiB
 *       per thread, not S's 16: it creates a 152 MiB buffer
 *   A   primary, the 1 KiB shader: takes Q's buffer
 *   X   primary, the 4 KiB shader: a 608 MiB buffer replaces Q's
 *   A is freed: it held the replaced buffer, which leaves the device's
 *       count of the current buffer's holders alone
 *   Y   primary, the 1 KiB shader: takes X's buffer, which X still holds
 *
 * P1, P2, Q, X and Y are then submitted in one vkQueueSubmit and waited on.
 * A log of the kernel's VM bindings shows the buffers made: 608, 1216 (then
 * unbound at C's reset), 152 and 608 MiB. Prints one JSON summary line.
 */

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "mf_vk.h"

#include "spill_spv.h"

static VkResult
record(VkCommandBuffer cmd, struct mf_compute *c, VkPipeline pipe)
{
   uint32_t words = 1 << 18;
   c->pipe = pipe;
   mf_compute_bind(cmd, c, &words, sizeof(words));
   vkCmdDispatch(cmd, 64, 1, 1);
   return vkEndCommandBuffer(cmd);
}

int
main(int argc, char **argv)
{
   bool validate = argc == 2 && !strcmp(argv[1], "--validate");
   if (argc > 2 || (argc == 2 && !validate)) {
      fprintf(stderr, "usage: mesa-fork-tls-secondary [--validate]\n");
      return 64;
   }
   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-tls-secondary", validate));
   struct mf_device d;
   mf_device_create(&d, mf_first_physical_device(&mi, "mesa-fork-tls-secondary"),
                    NULL);
   struct mf_buffer buf;
   mf_buffer_create(&d, 1 << 20, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0,
                    &buf);

   const unsigned kib[3] = {1, 4, 8};
   VkPipeline pipes[3];
   struct mf_compute c = {0};
   for (unsigned p = 0; p < 3; p++) {
      uint32_t priv_words = kib[p] * 256;
      VkSpecializationMapEntry entry = {0, 0, sizeof(priv_words)};
      VkSpecializationInfo spec = {1, &entry, sizeof(priv_words), &priv_words};
      pipes[p] = mf_compute_variant(&d, spill_spv, sizeof(spill_spv), 4,
                                    buf.buf, &spec, &c);
   }

   unsigned ok = 0;
   VkCommandBuffer sec = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_SECONDARY,
                                  VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT);
   ok += record(sec, &c, pipes[1]) == VK_SUCCESS;
   VkCommandBuffer cb = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   ok += record(cb, &c, pipes[2]) == VK_SUCCESS;

   VkCommandBuffer p1 = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   vkCmdExecuteCommands(p1, 1, &sec);
   ok += vkEndCommandBuffer(p1) == VK_SUCCESS;
   MF_CHECK(vkResetCommandBuffer(cb, 0));

   VkCommandBuffer p2 = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   vkCmdExecuteCommands(p2, 1, &sec);
   ok += vkEndCommandBuffer(p2) == VK_SUCCESS;

   uint32_t words = 1 << 18;
   VkCommandBuffer q = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   c.pipe = pipes[0];
   mf_compute_bind(q, &c, &words, sizeof(words));
   vkCmdDispatch(q, 64, 1, 1);
   vkCmdExecuteCommands(q, 1, &sec);
   ok += vkEndCommandBuffer(q) == VK_SUCCESS;

   VkCommandBuffer a = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   ok += record(a, &c, pipes[0]) == VK_SUCCESS;
   VkCommandBuffer x = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   ok += record(x, &c, pipes[1]) == VK_SUCCESS;
   vkFreeCommandBuffers(d.dev, d.pool, 1, &a);
   VkCommandBuffer y = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   ok += record(y, &c, pipes[0]) == VK_SUCCESS;

   VkCommandBuffer run[5] = {p1, p2, q, x, y};
   VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 5,
      .pCommandBuffers = run,
   };
   MF_CHECK(vkQueueSubmit(d.queue, 1, &si, VK_NULL_HANDLE));
   MF_CHECK(vkQueueWaitIdle(d.queue));

   VkCommandBuffer all[7] = {sec, cb, p1, p2, q, x, y};
   vkFreeCommandBuffers(d.dev, d.pool, 7, all);
   for (unsigned i = 1; i < 3; i++)
      vkDestroyPipeline(d.dev, pipes[i], NULL);
   c.pipe = pipes[0];
   mf_compute_destroy(&d, &c);
   mf_buffer_destroy(&d, &buf);
   mf_device_destroy(&d);
   unsigned messages = mi.messages;
   mf_instance_destroy(&mi);
   printf("{\"summary\": true, \"ok\": %u, \"validation_messages\": %u}\n", ok,
          messages);
   return messages ? 3 : ok == 8 ? 0 : 1;
}
