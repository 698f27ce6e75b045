/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-scenarios: records one synchronization pattern of compute work
 * in a command buffer, submits it and waits, so that a drm-shim capture can
 * show what the driver emitted for it. Works on any Vulkan device.
 *
 *   mesa-fork-scenarios [--validate] [--count N] SCENARIO
 *
 *   dispatches   N vkCmdDispatch, nothing between them
 *   base         N vkCmdDispatchBase, nothing between them
 *   barrier      dispatch, pipeline barrier, dispatch
 *   event        dispatch, vkCmdSetEvent + vkCmdWaitEvents, dispatch
 *   timestamp    timestamp, 2 dispatches, timestamp
 *   statistics   pipeline-statistics query (compute invocations) around
 *                2 dispatches (skipped with exit 77 when unsupported)
 *   indirect-fill    vkCmdFillBuffer of the arguments, barrier,
 *                    vkCmdDispatchIndirect
 *   indirect-update  vkCmdUpdateBuffer of the arguments, barrier,
 *                    vkCmdDispatchIndirect
 *   secondary    a secondary command buffer with N dispatches, executed
 *                by a primary that also dispatches once
 *   empty        nothing at all
 *   chain        N dispatches, each separated by a pipeline barrier
 *
 * Prints one line per submitted command buffer.
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_vk.h"

#include "fill_spv.h"

struct ctx {
   struct mf_instance mi;
   VkPhysicalDevice pd;
   VkDevice dev;
   VkQueue queue;
   uint32_t family;
   VkCommandPool pool;
   VkPipelineLayout layout;
   VkPipeline pipe;
   VkDescriptorSetLayout dsl;
   VkDescriptorPool dpool;
   VkDescriptorSet set;
   VkBuffer buf, args;
   VkDeviceMemory mem, args_mem;
};

static void
make_buffer(struct ctx *c, VkDeviceSize size, VkBufferUsageFlags usage,
            VkBuffer *buf, VkDeviceMemory *mem)
{
   VkPhysicalDeviceMemoryProperties mp;
   vkGetPhysicalDeviceMemoryProperties(c->pd, &mp);
   VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage = usage,
   };
   MF_CHECK(vkCreateBuffer(c->dev, &bci, NULL, buf));
   VkMemoryRequirements req;
   vkGetBufferMemoryRequirements(c->dev, *buf, &req);
   VkMemoryAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = req.size,
      .memoryTypeIndex = mf_find_memory_type(&mp, req.memoryTypeBits, 0),
   };
   MF_CHECK(vkAllocateMemory(c->dev, &ai, NULL, mem));
   MF_CHECK(vkBindBufferMemory(c->dev, *buf, *mem, 0));
}

static void
setup(struct ctx *c, bool validate)
{
   MF_CHECK(mf_instance_create(&c->mi, "mesa-fork-scenarios", validate));
   uint32_t n = 1;
   VkResult r = vkEnumeratePhysicalDevices(c->mi.instance, &n, &c->pd);
   if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
      fprintf(stderr, "mesa-fork-scenarios: no Vulkan device\n");
      exit(1);
   }

   VkPhysicalDeviceFeatures have;
   vkGetPhysicalDeviceFeatures(c->pd, &have);
   VkPhysicalDeviceFeatures want = {
      .pipelineStatisticsQuery = have.pipelineStatisticsQuery,
   };
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
      .pEnabledFeatures = &want,
   };
   MF_CHECK(vkCreateDevice(c->pd, &dci, NULL, &c->dev));
   vkGetDeviceQueue(c->dev, 0, 0, &c->queue);

   make_buffer(c, 1 << 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, &c->buf,
               &c->mem);
   make_buffer(c, 256,
               VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT |
                  VK_BUFFER_USAGE_TRANSFER_DST_BIT,
               &c->args, &c->args_mem);

   VkShaderModuleCreateInfo smci = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = sizeof(fill_spv),
      .pCode = fill_spv,
   };
   VkShaderModule sm;
   MF_CHECK(vkCreateShaderModule(c->dev, &smci, NULL, &sm));
   VkDescriptorSetLayoutBinding b = {
      .binding = 0,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .descriptorCount = 1,
      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
   };
   VkDescriptorSetLayoutCreateInfo dslci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = 1,
      .pBindings = &b,
   };
   MF_CHECK(vkCreateDescriptorSetLayout(c->dev, &dslci, NULL, &c->dsl));
   VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 8};
   VkPipelineLayoutCreateInfo plci = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .setLayoutCount = 1,
      .pSetLayouts = &c->dsl,
      .pushConstantRangeCount = 1,
      .pPushConstantRanges = &pcr,
   };
   MF_CHECK(vkCreatePipelineLayout(c->dev, &plci, NULL, &c->layout));
   VkComputePipelineCreateInfo cpci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .flags = VK_PIPELINE_CREATE_DISPATCH_BASE_BIT,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = sm,
                .pName = "main"},
      .layout = c->layout,
   };
   MF_CHECK(vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &cpci, NULL,
                                     &c->pipe));
   vkDestroyShaderModule(c->dev, sm, NULL);

   VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
   VkDescriptorPoolCreateInfo dpci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
      .maxSets = 1,
      .poolSizeCount = 1,
      .pPoolSizes = &ps,
   };
   MF_CHECK(vkCreateDescriptorPool(c->dev, &dpci, NULL, &c->dpool));
   VkDescriptorSetAllocateInfo dsai = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
      .descriptorPool = c->dpool,
      .descriptorSetCount = 1,
      .pSetLayouts = &c->dsl,
   };
   MF_CHECK(vkAllocateDescriptorSets(c->dev, &dsai, &c->set));
   VkDescriptorBufferInfo dbi = {c->buf, 0, VK_WHOLE_SIZE};
   VkWriteDescriptorSet w = {
      .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
      .dstSet = c->set,
      .descriptorCount = 1,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .pBufferInfo = &dbi,
   };
   vkUpdateDescriptorSets(c->dev, 1, &w, 0, NULL);

   VkCommandPoolCreateInfo cpoolci = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
   };
   MF_CHECK(vkCreateCommandPool(c->dev, &cpoolci, NULL, &c->pool));
}

static VkCommandBuffer
begin(struct ctx *c, VkCommandBufferLevel level)
{
   VkCommandBufferAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = c->pool,
      .level = level,
      .commandBufferCount = 1,
   };
   VkCommandBuffer cmd;
   MF_CHECK(vkAllocateCommandBuffers(c->dev, &ai, &cmd));
   VkCommandBufferInheritanceInfo inh = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO,
   };
   VkCommandBufferBeginInfo bi = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
      .pInheritanceInfo = &inh,
   };
   MF_CHECK(vkBeginCommandBuffer(cmd, &bi));
   return cmd;
}

static void
bind(struct ctx *c, VkCommandBuffer cmd)
{
   uint32_t push[2] = {3, 1024};
   vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipe);
   vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->layout, 0,
                           1, &c->set, 0, NULL);
   vkCmdPushConstants(cmd, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                      sizeof(push), push);
}

static void
barrier(VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags srca,
        VkPipelineStageFlags dst, VkAccessFlags dsta)
{
   VkMemoryBarrier mb = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = srca,
      .dstAccessMask = dsta,
   };
   vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

static void
compute_barrier(VkCommandBuffer cmd)
{
   barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
           VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
           VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

static void
submit(struct ctx *c, VkCommandBuffer cmd, const char *what)
{
   MF_CHECK(vkEndCommandBuffer(cmd));
   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence;
   MF_CHECK(vkCreateFence(c->dev, &fci, NULL, &fence));
   VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &cmd,
   };
   MF_CHECK(vkQueueSubmit(c->queue, 1, &si, fence));
   MF_CHECK(vkWaitForFences(c->dev, 1, &fence, VK_TRUE, 10000000000ull));
   vkDestroyFence(c->dev, fence, NULL);
   printf("submitted: %s\n", what);
}

static void
indirect(struct ctx *c, VkCommandBuffer cmd, bool update)
{
   if (update) {
      const uint32_t grid[3] = {4, 1, 1};
      vkCmdUpdateBuffer(cmd, c->args, 0, sizeof(grid), grid);
   } else {
      vkCmdFillBuffer(cmd, c->args, 0, 12, 1);
   }
   barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
           VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
           VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
   bind(c, cmd);
   vkCmdDispatchIndirect(cmd, c->args, 0);
}

int
main(int argc, char **argv)
{
   bool validate = false;
   unsigned count = 8;
   const char *scenario = NULL;
   for (int i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--validate"))
         validate = true;
      else if (!strcmp(argv[i], "--count") && i + 1 < argc)
         count = strtoul(argv[++i], NULL, 10);
      else if (!scenario && argv[i][0] != '-')
         scenario = argv[i];
      else
         scenario = NULL, argc = 0;
   }
   if (!scenario || count == 0 || count > 4096) {
      fprintf(stderr, "usage: mesa-fork-scenarios [--validate] [--count N] "
                      "SCENARIO (see the source for the list)\n");
      return 64;
   }

   struct ctx c = {0};
   setup(&c, validate);
   VkCommandBuffer cmd = begin(&c, VK_COMMAND_BUFFER_LEVEL_PRIMARY);

   if (!strcmp(scenario, "dispatches") || !strcmp(scenario, "base")) {
      bind(&c, cmd);
      for (unsigned i = 0; i < count; i++) {
         if (scenario[0] == 'b')
            vkCmdDispatchBase(cmd, i, 0, 0, 1, 1, 1);
         else
            vkCmdDispatch(cmd, 16, 1, 1);
      }
   } else if (!strcmp(scenario, "barrier")) {
      bind(&c, cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
      compute_barrier(cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
   } else if (!strcmp(scenario, "chain")) {
      bind(&c, cmd);
      for (unsigned i = 0; i < count; i++) {
         if (i)
            compute_barrier(cmd);
         vkCmdDispatch(cmd, 16, 1, 1);
      }
   } else if (!strcmp(scenario, "event")) {
      VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
      VkEvent ev;
      MF_CHECK(vkCreateEvent(c.dev, &eci, NULL, &ev));
      bind(&c, cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
      vkCmdSetEvent(cmd, ev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
      VkMemoryBarrier mb = {
         .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
         .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
         .dstAccessMask = VK_ACCESS_SHADER_READ_BIT,
      };
      vkCmdWaitEvents(cmd, 1, &ev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 1, &mb, 0, NULL,
                      0, NULL);
      vkCmdDispatch(cmd, 16, 1, 1);
      submit(&c, cmd, scenario);
      vkDestroyEvent(c.dev, ev, NULL);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "timestamp") ||
              !strcmp(scenario, "statistics")) {
      bool stats = scenario[0] == 's';
      VkPhysicalDeviceFeatures have;
      vkGetPhysicalDeviceFeatures(c.pd, &have);
      if (stats && !have.pipelineStatisticsQuery) {
         printf("skipped: pipelineStatisticsQuery not supported\n");
         return 77;
      }
      VkQueryPoolCreateInfo qpci = {
         .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
         .queryType = stats ? VK_QUERY_TYPE_PIPELINE_STATISTICS
                            : VK_QUERY_TYPE_TIMESTAMP,
         .queryCount = 2,
         .pipelineStatistics =
            stats ? VK_QUERY_PIPELINE_STATISTIC_COMPUTE_SHADER_INVOCATIONS_BIT
                  : 0,
      };
      VkQueryPool qp;
      MF_CHECK(vkCreateQueryPool(c.dev, &qpci, NULL, &qp));
      vkCmdResetQueryPool(cmd, qp, 0, 2);
      bind(&c, cmd);
      if (stats)
         vkCmdBeginQuery(cmd, qp, 0, 0);
      else
         vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 0);
      vkCmdDispatch(cmd, 16, 1, 1);
      vkCmdDispatch(cmd, 16, 1, 1);
      if (stats)
         vkCmdEndQuery(cmd, qp, 0);
      else
         vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1);
      submit(&c, cmd, scenario);
      vkDestroyQueryPool(c.dev, qp, NULL);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "indirect-fill")) {
      indirect(&c, cmd, false);
   } else if (!strcmp(scenario, "indirect-update")) {
      indirect(&c, cmd, true);
   } else if (!strcmp(scenario, "secondary")) {
      VkCommandBuffer sec = begin(&c, VK_COMMAND_BUFFER_LEVEL_SECONDARY);
      bind(&c, sec);
      for (unsigned i = 0; i < count; i++)
         vkCmdDispatch(sec, 16, 1, 1);
      MF_CHECK(vkEndCommandBuffer(sec));
      vkCmdExecuteCommands(cmd, 1, &sec);
      bind(&c, cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
   } else if (!strcmp(scenario, "empty")) {
      /* nothing */
   } else {
      fprintf(stderr, "mesa-fork-scenarios: unknown scenario \"%s\"\n",
              scenario);
      return 64;
   }

   if (cmd)
      submit(&c, cmd, scenario);

   MF_CHECK(vkDeviceWaitIdle(c.dev));
   vkDestroyCommandPool(c.dev, c.pool, NULL);
   vkDestroyPipeline(c.dev, c.pipe, NULL);
   vkDestroyPipelineLayout(c.dev, c.layout, NULL);
   vkDestroyDescriptorPool(c.dev, c.dpool, NULL);
   vkDestroyDescriptorSetLayout(c.dev, c.dsl, NULL);
   vkDestroyBuffer(c.dev, c.buf, NULL);
   vkDestroyBuffer(c.dev, c.args, NULL);
   vkFreeMemory(c.dev, c.mem, NULL);
   vkFreeMemory(c.dev, c.args_mem, NULL);
   vkDestroyDevice(c.dev, NULL);
   unsigned messages = c.mi.messages;
   mf_instance_destroy(&c.mi);
   printf("validation messages: %u\n", messages);
   return messages ? 3 : 0;
}
