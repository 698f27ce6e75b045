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
   struct mf_device d;
   struct mf_buffer buf, args;
   struct mf_compute c;
};

static void
setup(struct ctx *c, bool validate)
{
   MF_CHECK(mf_instance_create(&c->mi, "mesa-fork-scenarios", validate));
   VkPhysicalDevice pd = mf_first_physical_device(&c->mi, "mesa-fork-scenarios");
   VkPhysicalDeviceFeatures have;
   vkGetPhysicalDeviceFeatures(pd, &have);
   VkPhysicalDeviceFeatures want = {
      .pipelineStatisticsQuery = have.pipelineStatisticsQuery,
   };
   mf_device_create(&c->d, pd, &want);
   mf_buffer_create(&c->d, 1 << 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0,
                    &c->buf);
   mf_buffer_create(&c->d, 256,
                    VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT |
                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                    -1, 0, &c->args);
   mf_compute_create(&c->d, fill_spv, sizeof(fill_spv), 8, c->buf.buf, NULL,
                     VK_PIPELINE_CREATE_DISPATCH_BASE_BIT, &c->c);
}

static VkCommandBuffer
begin(struct ctx *c, VkCommandBufferLevel level)
{
   return mf_begin(&c->d, level, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
}

static void
bind(struct ctx *c, VkCommandBuffer cmd)
{
   uint32_t push[2] = {3, 1024};
   mf_compute_bind(cmd, &c->c, push, sizeof(push));
}

static void
compute_barrier(VkCommandBuffer cmd)
{
   mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

static void
submit(struct ctx *c, VkCommandBuffer cmd, const char *what)
{
   mf_submit_wait(&c->d, cmd);
   printf("submitted: %s\n", what);
}

static void
indirect(struct ctx *c, VkCommandBuffer cmd, bool update)
{
   if (update) {
      const uint32_t grid[3] = {4, 1, 1};
      vkCmdUpdateBuffer(cmd, c->args.buf, 0, sizeof(grid), grid);
   } else {
      vkCmdFillBuffer(cmd, c->args.buf, 0, 12, 1);
   }
   mf_barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
              VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
              VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
   bind(c, cmd);
   vkCmdDispatchIndirect(cmd, c->args.buf, 0);
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
      MF_CHECK(vkCreateEvent(c.d.dev, &eci, NULL, &ev));
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
      vkDestroyEvent(c.d.dev, ev, NULL);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "timestamp") ||
              !strcmp(scenario, "statistics")) {
      bool stats = scenario[0] == 's';
      VkPhysicalDeviceFeatures have;
      vkGetPhysicalDeviceFeatures(c.d.pd, &have);
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
      MF_CHECK(vkCreateQueryPool(c.d.dev, &qpci, NULL, &qp));
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
      vkDestroyQueryPool(c.d.dev, qp, NULL);
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

   MF_CHECK(vkDeviceWaitIdle(c.d.dev));
   mf_compute_destroy(&c.d, &c.c);
   mf_buffer_destroy(&c.d, &c.buf);
   mf_buffer_destroy(&c.d, &c.args);
   mf_device_destroy(&c.d);
   unsigned messages = c.mi.messages;
   mf_instance_destroy(&c.mi);
   printf("validation messages: %u\n", messages);
   return messages ? 3 : 0;
}
