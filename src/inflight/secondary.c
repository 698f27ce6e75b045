/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-tls-secondary: what a secondary command buffer's TLS need
 * brings to the primary that executes it, with the device-shared TLS buffer
 * replaced and dropped in between. Shaders spilling 1, 4 and 8 KiB private
 * arrays (4, 16 and 32 KiB per thread on a Valhall GPU):
 *
 *   A   primary,   the 4 KiB shader: the shared buffer is created for it
 *   S   secondary, the 1 KiB shader: recorded against A's buffer
 *   C   primary,   the 8 KiB shader: a larger buffer replaces A's
 *   A is freed, C reset: nobody holds the larger buffer, the device drops it
 *   P   primary executing S: needs what S needs, 4 KiB per thread
 *
 * A log of the kernel's VM bindings then shows the size of P's buffer.
 * Prints one JSON summary line.
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
   VkCommandBuffer a = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   ok += record(a, &c, pipes[1]) == VK_SUCCESS;
   VkCommandBuffer s = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_SECONDARY, 0);
   ok += record(s, &c, pipes[0]) == VK_SUCCESS;
   VkCommandBuffer cb = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   ok += record(cb, &c, pipes[2]) == VK_SUCCESS;
   vkFreeCommandBuffers(d.dev, d.pool, 1, &a);
   MF_CHECK(vkResetCommandBuffer(cb, 0));

   VkCommandBuffer p = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
   vkCmdExecuteCommands(p, 1, &s);
   ok += vkEndCommandBuffer(p) == VK_SUCCESS;

   VkCommandBuffer all[3] = {s, cb, p};
   vkFreeCommandBuffers(d.dev, d.pool, 3, all);
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
   return messages ? 3 : ok == 4 ? 0 : 1;
}
