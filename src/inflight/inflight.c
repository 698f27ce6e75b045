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
 *                      [--dispatches D] [--groups G] [--tls-kib K]
 *                      [--barrier] tls|wls
 *
 * --barrier puts a compute-to-compute pipeline barrier between dispatches.
 * --tls-grow gives command buffer i a shader needing (i + 1) * K KiB, so
 * that each one needs more TLS than the one before.
 *
 *   tls   a shader spilling a K KiB (default 16) private array per thread
 *   wls   a shader with 32 KiB of workgroup-shared memory (WLS)
 *
 * Prints one JSON line per command buffer, then a summary line.
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_vk.h"

#include "shared_spv.h"
#include "spill_spv.h"

int
main(int argc, char **argv)
{
   unsigned n = 12, dispatches = 1, groups = 64, tls_kib = 16;
   bool validate = false, do_submit = false, barriers = false, grow = false;
   const char *kind = NULL;
   for (int i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--validate"))
         validate = true;
      else if (!strcmp(argv[i], "--submit"))
         do_submit = true;
      else if (!strcmp(argv[i], "--barrier"))
         barriers = true;
      else if (!strcmp(argv[i], "--tls-grow"))
         grow = true;
      else if (!strcmp(argv[i], "--cmdbufs") && i + 1 < argc)
         n = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--dispatches") && i + 1 < argc)
         dispatches = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--groups") && i + 1 < argc)
         groups = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--tls-kib") && i + 1 < argc)
         tls_kib = strtoul(argv[++i], NULL, 10);
      else if (!kind && (!strcmp(argv[i], "tls") || !strcmp(argv[i], "wls")))
         kind = argv[i];
      else
         kind = NULL, argc = 0;
   }
   if (!kind || n == 0 || n > 1024 || dispatches == 0 || groups == 0 ||
       tls_kib == 0 || tls_kib > 256) {
      fprintf(stderr, "usage: mesa-fork-inflight [--validate] [--submit] "
                      "[--cmdbufs N] [--dispatches D] [--groups G] "
                      "[--tls-kib K] [--barrier] [--tls-grow] tls|wls\n");
      return 64;
   }
   bool tls = !strcmp(kind, "tls");

   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-inflight", validate));
   uint32_t count = 1;
   VkPhysicalDevice pd;
   VkResult r = vkEnumeratePhysicalDevices(mi.instance, &count, &pd);
   if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) {
      fprintf(stderr, "mesa-fork-inflight: no Vulkan device\n");
      return 1;
   }

   float prio = 1.0f;
   VkDeviceQueueCreateInfo qci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = 0,
      .queueCount = 1,
      .pQueuePriorities = &prio,
   };
   VkDeviceCreateInfo dci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &qci,
   };
   VkDevice dev;
   MF_CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
   VkQueue queue;
   vkGetDeviceQueue(dev, 0, 0, &queue);

   VkPhysicalDeviceMemoryProperties mp;
   vkGetPhysicalDeviceMemoryProperties(pd, &mp);
   VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = 1 << 20,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
   };
   VkBuffer buf;
   MF_CHECK(vkCreateBuffer(dev, &bci, NULL, &buf));
   VkMemoryRequirements req;
   vkGetBufferMemoryRequirements(dev, buf, &req);
   VkMemoryAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = req.size,
      .memoryTypeIndex = mf_find_memory_type(&mp, req.memoryTypeBits, 0),
   };
   VkDeviceMemory mem;
   MF_CHECK(vkAllocateMemory(dev, &ai, NULL, &mem));
   MF_CHECK(vkBindBufferMemory(dev, buf, mem, 0));

   VkShaderModuleCreateInfo smci = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = tls ? sizeof(spill_spv) : sizeof(shared_spv),
      .pCode = tls ? spill_spv : shared_spv,
   };
   VkShaderModule sm;
   MF_CHECK(vkCreateShaderModule(dev, &smci, NULL, &sm));
   VkDescriptorSetLayoutBinding b = {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                     VK_SHADER_STAGE_COMPUTE_BIT, NULL};
   VkDescriptorSetLayoutCreateInfo dslci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = 1,
      .pBindings = &b,
   };
   VkDescriptorSetLayout dsl;
   MF_CHECK(vkCreateDescriptorSetLayout(dev, &dslci, NULL, &dsl));
   VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
   VkPipelineLayoutCreateInfo plci = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .setLayoutCount = 1,
      .pSetLayouts = &dsl,
      .pushConstantRangeCount = 1,
      .pPushConstantRanges = &pcr,
   };
   VkPipelineLayout pl;
   MF_CHECK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));
   /* One pipeline per command buffer with --tls-grow, else one for all. */
   unsigned npipes = grow ? n : 1;
   VkPipeline *pipes = calloc(npipes, sizeof(*pipes));
   for (unsigned p = 0; p < npipes; p++) {
      uint32_t priv_words = tls_kib * 256 * (p + 1);
      VkSpecializationMapEntry entry = {0, 0, sizeof(priv_words)};
      VkSpecializationInfo spec = {1, &entry, sizeof(priv_words), &priv_words};
      VkComputePipelineCreateInfo cpci = {
         .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
         .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                   .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                   .module = sm,
                   .pName = "main",
                   .pSpecializationInfo = tls ? &spec : NULL},
         .layout = pl,
      };
      MF_CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, NULL,
                                        &pipes[p]));
   }
   VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
   VkDescriptorPoolCreateInfo dpci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
      .maxSets = 1,
      .poolSizeCount = 1,
      .pPoolSizes = &ps,
   };
   VkDescriptorPool dp;
   MF_CHECK(vkCreateDescriptorPool(dev, &dpci, NULL, &dp));
   VkDescriptorSetAllocateInfo dsai = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
      .descriptorPool = dp,
      .descriptorSetCount = 1,
      .pSetLayouts = &dsl,
   };
   VkDescriptorSet set;
   MF_CHECK(vkAllocateDescriptorSets(dev, &dsai, &set));
   VkDescriptorBufferInfo dbi = {buf, 0, VK_WHOLE_SIZE};
   VkWriteDescriptorSet w = {
      .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
      .dstSet = set,
      .descriptorCount = 1,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .pBufferInfo = &dbi,
   };
   vkUpdateDescriptorSets(dev, 1, &w, 0, NULL);

   VkCommandPoolCreateInfo cpoolci = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
   };
   VkCommandPool pool;
   MF_CHECK(vkCreateCommandPool(dev, &cpoolci, NULL, &pool));
   VkCommandBuffer *cmds = calloc(n, sizeof(*cmds));
   VkCommandBufferAllocateInfo cbai = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = pool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = n,
   };
   MF_CHECK(vkAllocateCommandBuffers(dev, &cbai, cmds));

   unsigned ok = 0, oom = 0, other = 0;
   for (unsigned i = 0; i < n; i++) {
      VkCommandBufferBeginInfo bi = {
         .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      };
      MF_CHECK(vkBeginCommandBuffer(cmds[i], &bi));
      uint32_t words = 1 << 18;
      vkCmdBindPipeline(cmds[i], VK_PIPELINE_BIND_POINT_COMPUTE,
                        pipes[grow ? i : 0]);
      vkCmdBindDescriptorSets(cmds[i], VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1,
                              &set, 0, NULL);
      vkCmdPushConstants(cmds[i], pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &words);
      for (unsigned d = 0; d < dispatches; d++) {
         if (barriers && d) {
            VkMemoryBarrier mb = {
               .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
               .dstAccessMask = VK_ACCESS_SHADER_READ_BIT,
            };
            vkCmdPipelineBarrier(cmds[i], VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                                 &mb, 0, NULL, 0, NULL);
         }
         vkCmdDispatch(cmds[i], groups, 1, 1);
      }
      r = vkEndCommandBuffer(cmds[i]);
      ok += r == VK_SUCCESS;
      oom += r == VK_ERROR_OUT_OF_DEVICE_MEMORY;
      other += r != VK_SUCCESS && r != VK_ERROR_OUT_OF_DEVICE_MEMORY;
      printf("{\"cmdbuf\": %u, \"end\": \"%s\"}\n", i, mf_result_str(r));
      if (r == VK_SUCCESS && do_submit) {
         VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 1,
            .pCommandBuffers = &cmds[i],
         };
         MF_CHECK(vkQueueSubmit(queue, 1, &si, VK_NULL_HANDLE));
      }
   }
   if (do_submit)
      MF_CHECK(vkQueueWaitIdle(queue));

   vkFreeCommandBuffers(dev, pool, n, cmds);
   free(cmds);
   vkDestroyCommandPool(dev, pool, NULL);
   vkDestroyDescriptorPool(dev, dp, NULL);
   for (unsigned p = 0; p < npipes; p++)
      vkDestroyPipeline(dev, pipes[p], NULL);
   free(pipes);
   vkDestroyPipelineLayout(dev, pl, NULL);
   vkDestroyDescriptorSetLayout(dev, dsl, NULL);
   vkDestroyShaderModule(dev, sm, NULL);
   vkDestroyBuffer(dev, buf, NULL);
   vkFreeMemory(dev, mem, NULL);
   vkDestroyDevice(dev, NULL);
   unsigned messages = mi.messages;
   mf_instance_destroy(&mi);
   printf("{\"summary\": true, \"ok\": %u, \"out_of_device_memory\": %u, "
          "\"other\": %u, \"validation_messages\": %u}\n",
          ok, oom, other, messages);
   return messages ? 3 : other ? 1 : 0;
}
