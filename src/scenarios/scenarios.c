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
 *   indirect-dispatch  a dispatch writes the arguments, barrier,
 *                      vkCmdDispatchIndirect
 *   indirect-update  vkCmdUpdateBuffer of the arguments, barrier,
 *                    vkCmdDispatchIndirect
 *   secondary    a secondary command buffer with N dispatches, executed
 *                by a primary that also dispatches once
 *   empty        nothing at all
 *   chain        N dispatches, each separated by a pipeline barrier
 *   exec-barrier     dispatch, vkCmdPipelineBarrier with stages only (an
 *                    execution dependency), dispatch
 *   exec-barrier2    dispatch, vkCmdPipelineBarrier2 with a memory barrier
 *                    that has stages and no accesses, dispatch
 *   empty-barrier2   dispatch, vkCmdPipelineBarrier2 with no barrier
 *                    structures at all, dispatch
 *   sync2        dispatch, vkCmdPipelineBarrier2 with a buffer memory
 *                barrier, dispatch
 *   events2      dispatch, vkCmdSetEvent2, dispatch, vkCmdWaitEvents2,
 *                dispatch
 *   render       dispatch, a dynamic-rendering pass that clears an image,
 *                dispatch, barrier, dispatch
 *   host         dispatch, barrier to the host stage; the fence wait
 *                follows
 *   meta         vkCmdFillBuffer, dispatch, vkCmdCopyBuffer, dispatch,
 *                vkCmdUpdateBuffer, nothing between them (disjoint ranges)
 *   timestamp-barrier  timestamp, dispatch, barrier, dispatch, timestamp
 *   subpass-query    a render pass whose subpass has a self-dependency:
 *                    clear, barrier, an empty compute-invocation query,
 *                    clear; after the pass, a barrier and a dispatch
 *                    (skipped with exit 77 without pipelineStatisticsQuery)
 *   mixed        N rounds of: dispatch, barrier, vkCmdFillBuffer, barrier,
 *                indirect dispatch, barrier
 *
 * The scenarios that need Vulkan 1.3 (synchronization2, dynamic rendering)
 * exit with 77 on a device without it.
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
   struct mf_buffer buf, args, scratch;
   struct mf_compute c, args_writer;
   bool vk13;
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

   /* synchronization2 and dynamic rendering, where the device has them. */
   VkPhysicalDeviceProperties props;
   vkGetPhysicalDeviceProperties(pd, &props);
   VkPhysicalDeviceVulkan13Features have13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
   };
   if (props.apiVersion >= VK_API_VERSION_1_3) {
      VkPhysicalDeviceFeatures2 f2 = {
         .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
         .pNext = &have13,
      };
      vkGetPhysicalDeviceFeatures2(pd, &f2);
   }
   c->vk13 = have13.synchronization2 && have13.dynamicRendering;
   VkPhysicalDeviceVulkan13Features want13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
      .synchronization2 = VK_TRUE,
      .dynamicRendering = VK_TRUE,
   };
   mf_device_create_chain(&c->d, pd, 0, &want, c->vk13 ? &want13 : NULL);
   mf_buffer_create(&c->d, 1 << 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0,
                    &c->buf);
   mf_buffer_create(&c->d, 256,
                    VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT |
                       VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                       VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                    -1, 0, &c->args);
   mf_buffer_create(&c->d, 4096,
                    VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                    -1, 0, &c->scratch);
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
barrier2(VkCommandBuffer cmd, const VkMemoryBarrier2 *mb,
         const VkBufferMemoryBarrier2 *bb)
{
   VkDependencyInfo dep = {
      .sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO,
      .memoryBarrierCount = mb ? 1 : 0,
      .pMemoryBarriers = mb,
      .bufferMemoryBarrierCount = bb ? 1 : 0,
      .pBufferMemoryBarriers = bb,
   };
   vkCmdPipelineBarrier2(cmd, &dep);
}

static void
events2(struct ctx *c, VkCommandBuffer cmd)
{
   VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
   VkEvent ev;
   MF_CHECK(vkCreateEvent(c->d.dev, &eci, NULL, &ev));
   const VkMemoryBarrier2 mb = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2,
      .srcStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
      .srcAccessMask = VK_ACCESS_2_SHADER_WRITE_BIT,
      .dstStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
      .dstAccessMask = VK_ACCESS_2_SHADER_READ_BIT,
   };
   const VkDependencyInfo dep = {
      .sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO,
      .memoryBarrierCount = 1,
      .pMemoryBarriers = &mb,
   };
   bind(c, cmd);
   vkCmdDispatch(cmd, 16, 1, 1);
   vkCmdSetEvent2(cmd, ev, &dep);
   vkCmdDispatch(cmd, 16, 1, 1);
   vkCmdWaitEvents2(cmd, 1, &ev, &dep);
   vkCmdDispatch(cmd, 16, 1, 1);
   mf_submit_wait(&c->d, cmd);
   printf("submitted: events2\n");
   vkDestroyEvent(c->d.dev, ev, NULL);
}

/* A dispatch, a render pass that only clears a 64x32 image, a dispatch with
 * nothing between it and the pass, then a barrier and a last dispatch.
 */
static void
render(struct ctx *c, VkCommandBuffer cmd)
{
   struct mf_image img;
   mf_image_2d_create(&c->d, 64, 32, VK_FORMAT_R8G8B8A8_UNORM,
                      VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT, &img);

   /* The layout transition comes first, so that nothing but the pass
    * itself separates the first dispatch from the clear.
    */
   mf_to_color_attachment(cmd, &img, VK_PIPELINE_STAGE_2_NONE, 0);

   bind(c, cmd);
   vkCmdDispatch(cmd, 16, 1, 1);
   mf_clear_pass(cmd, &img);
   vkCmdDispatch(cmd, 16, 1, 1);
   compute_barrier(cmd);
   vkCmdDispatch(cmd, 16, 1, 1);
   mf_submit_wait(&c->d, cmd);
   printf("submitted: render\n");
   mf_image_destroy(&c->d, &img);
}

/* Inside a render pass, a barrier on the subpass self-dependency ends the
 * graphics control stream; the query then opens a compute stream, and the
 * second clear queues a graphics stream behind it. The dispatch after the
 * pass must run after both clears.
 */
static void
subpass_query(struct ctx *c, VkCommandBuffer cmd)
{
   const VkFormat format = VK_FORMAT_R8G8B8A8_UNORM;
   struct mf_image img;
   mf_image_2d_create(&c->d, 64, 32, format,
                      VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT, &img);
   const VkImageSubresourceRange color = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0,
                                          1};

   VkAttachmentDescription att = {
      .format = format,
      .samples = VK_SAMPLE_COUNT_1_BIT,
      .loadOp = VK_ATTACHMENT_LOAD_OP_LOAD,
      .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
      .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
      .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
      .initialLayout = VK_IMAGE_LAYOUT_GENERAL,
      .finalLayout = VK_IMAGE_LAYOUT_GENERAL,
   };
   VkAttachmentReference ref = {0, VK_IMAGE_LAYOUT_GENERAL};
   VkSubpassDescription subpass = {
      .pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
      .colorAttachmentCount = 1,
      .pColorAttachments = &ref,
   };
   VkSubpassDependency self = {
      .srcSubpass = 0,
      .dstSubpass = 0,
      .srcStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
      .dstStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
      .srcAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
      .dependencyFlags = VK_DEPENDENCY_BY_REGION_BIT,
   };
   VkRenderPassCreateInfo rpci = {
      .sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
      .attachmentCount = 1,
      .pAttachments = &att,
      .subpassCount = 1,
      .pSubpasses = &subpass,
      .dependencyCount = 1,
      .pDependencies = &self,
   };
   VkRenderPass pass;
   MF_CHECK(vkCreateRenderPass(c->d.dev, &rpci, NULL, &pass));
   VkFramebufferCreateInfo fci = {
      .sType = VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO,
      .renderPass = pass,
      .attachmentCount = 1,
      .pAttachments = &img.view,
      .width = 64,
      .height = 32,
      .layers = 1,
   };
   VkFramebuffer fb;
   MF_CHECK(vkCreateFramebuffer(c->d.dev, &fci, NULL, &fb));
   VkQueryPoolCreateInfo qpci = {
      .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
      .queryType = VK_QUERY_TYPE_PIPELINE_STATISTICS,
      .queryCount = 1,
      .pipelineStatistics =
         VK_QUERY_PIPELINE_STATISTIC_COMPUTE_SHADER_INVOCATIONS_BIT,
   };
   VkQueryPool qp;
   MF_CHECK(vkCreateQueryPool(c->d.dev, &qpci, NULL, &qp));

   VkImageMemoryBarrier to_general = {
      .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
      .dstAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
      .oldLayout = VK_IMAGE_LAYOUT_UNDEFINED,
      .newLayout = VK_IMAGE_LAYOUT_GENERAL,
      .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
      .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
      .image = img.image,
      .subresourceRange = color,
   };
   vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                        VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, 0, 0,
                        NULL, 0, NULL, 1, &to_general);
   vkCmdResetQueryPool(cmd, qp, 0, 1);

   VkRenderPassBeginInfo rbi = {
      .sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO,
      .renderPass = pass,
      .framebuffer = fb,
      .renderArea = {{0, 0}, {64, 32}},
   };
   const VkClearAttachment clear = {
      .aspectMask = VK_IMAGE_ASPECT_COLOR_BIT,
      .colorAttachment = 0,
      .clearValue.color.float32 = {1.0f, 0.0f, 0.0f, 1.0f},
   };
   const VkClearRect rect = {{{0, 0}, {64, 32}}, 0, 1};
   vkCmdBeginRenderPass(cmd, &rbi, VK_SUBPASS_CONTENTS_INLINE);
   vkCmdClearAttachments(cmd, 1, &clear, 1, &rect);
   VkMemoryBarrier self_mb = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
   };
   vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                        VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                        VK_DEPENDENCY_BY_REGION_BIT, 1, &self_mb, 0, NULL, 0,
                        NULL);
   vkCmdBeginQuery(cmd, qp, 0, 0);
   vkCmdEndQuery(cmd, qp, 0);
   vkCmdClearAttachments(cmd, 1, &clear, 1, &rect);
   vkCmdEndRenderPass(cmd);

   mf_barrier(cmd, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
              VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
   bind(c, cmd);
   vkCmdDispatch(cmd, 16, 1, 1);
   mf_submit_wait(&c->d, cmd);
   printf("submitted: subpass-query\n");

   vkDestroyQueryPool(c->d.dev, qp, NULL);
   vkDestroyFramebuffer(c->d.dev, fb, NULL);
   vkDestroyRenderPass(c->d.dev, pass, NULL);
   mf_image_destroy(&c->d, &img);
}

static void
submit(struct ctx *c, VkCommandBuffer cmd, const char *what)
{
   mf_submit_wait(&c->d, cmd);
   printf("submitted: %s\n", what);
}

static void
indirect(struct ctx *c, VkCommandBuffer cmd, bool update, bool shader)
{
   if (shader) {
      /* Made here, so that the other scenarios bind one buffer only. */
      mf_compute_create(&c->d, fill_spv, sizeof(fill_spv), 8, c->args.buf, NULL,
                        0, &c->args_writer);
      /* args[i] = i; the grid at offset 4 is 1 x 2 x 3 workgroups. */
      uint32_t push[2] = {1, 4};
      mf_compute_bind(cmd, &c->args_writer, push, sizeof(push));
      vkCmdDispatch(cmd, 1, 1, 1);
      mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
                 VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
      bind(c, cmd);
      vkCmdDispatchIndirect(cmd, c->args.buf, 4);
      return;
   }
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

/* Every scenario main() knows, in the order the tests run them. */
static const char *const scenario_names[] = {
   "dispatches", "base", "barrier", "chain", "event", "timestamp",
   "statistics", "indirect-fill", "indirect-update", "indirect-dispatch",
   "secondary", "empty", "exec-barrier", "exec-barrier2", "empty-barrier2",
   "sync2", "events2", "render", "host", "meta", "timestamp-barrier", "mixed",
   "subpass-query",
};
#define N_SCENARIOS (sizeof(scenario_names) / sizeof(scenario_names[0]))

int
main(int argc, char **argv)
{
   if (argc == 2 && !strcmp(argv[1], "--list")) {
      for (unsigned i = 0; i < N_SCENARIOS; i++)
         printf("%s\n", scenario_names[i]);
      return 0;
   }

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
                      "SCENARIO\n       mesa-fork-scenarios --list\n");
      return 64;
   }

   struct ctx c = {0};
   setup(&c, validate);
   bool needs13 = !strcmp(scenario, "exec-barrier2") ||
                  !strcmp(scenario, "empty-barrier2") ||
                  !strcmp(scenario, "sync2") || !strcmp(scenario, "events2") ||
                  !strcmp(scenario, "render");
   if (needs13 && !c.vk13) {
      printf("skipped: %s needs synchronization2 and dynamic rendering\n",
             scenario);
      return 77;
   }
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
   } else if (!strcmp(scenario, "exec-barrier")) {
      bind(&c, cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
      vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 0, NULL, 0,
                           NULL, 0, NULL);
      vkCmdDispatch(cmd, 16, 1, 1);
   } else if (!strcmp(scenario, "exec-barrier2") ||
              !strcmp(scenario, "empty-barrier2")) {
      const VkMemoryBarrier2 exec = {
         .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2,
         .srcStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
         .dstStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
      };
      bind(&c, cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
      barrier2(cmd, scenario[1] == 'x' ? &exec : NULL, NULL);
      vkCmdDispatch(cmd, 16, 1, 1);
   } else if (!strcmp(scenario, "sync2")) {
      const VkBufferMemoryBarrier2 bb = {
         .sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER_2,
         .srcStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
         .srcAccessMask = VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT,
         .dstStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
         .dstAccessMask = VK_ACCESS_2_SHADER_STORAGE_READ_BIT,
         .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
         .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
         .buffer = c.buf.buf,
         .size = VK_WHOLE_SIZE,
      };
      bind(&c, cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
      barrier2(cmd, NULL, &bb);
      vkCmdDispatch(cmd, 16, 1, 1);
   } else if (!strcmp(scenario, "events2")) {
      events2(&c, cmd);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "render")) {
      render(&c, cmd);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "subpass-query")) {
      VkPhysicalDeviceFeatures have;
      vkGetPhysicalDeviceFeatures(c.d.pd, &have);
      if (!have.pipelineStatisticsQuery) {
         printf("skipped: pipelineStatisticsQuery not supported\n");
         return 77;
      }
      subpass_query(&c, cmd);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "host")) {
      bind(&c, cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
      mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                 VK_ACCESS_HOST_READ_BIT);
   } else if (!strcmp(scenario, "meta")) {
      /* Transfers on ranges of their own: nothing needs ordering. */
      const uint32_t words[4] = {1, 2, 3, 4};
      const VkBufferCopy copy = {.srcOffset = 512, .dstOffset = 1024,
                                 .size = 256};
      bind(&c, cmd);
      vkCmdFillBuffer(cmd, c.scratch.buf, 0, 256, 7);
      vkCmdDispatch(cmd, 16, 1, 1);
      vkCmdCopyBuffer(cmd, c.scratch.buf, c.scratch.buf, 1, &copy);
      vkCmdDispatch(cmd, 16, 1, 1);
      vkCmdUpdateBuffer(cmd, c.scratch.buf, 2048, sizeof(words), words);
   } else if (!strcmp(scenario, "mixed")) {
      for (unsigned i = 0; i < count; i++) {
         bind(&c, cmd);
         vkCmdDispatch(cmd, 16, 1, 1);
         compute_barrier(cmd);
         indirect(&c, cmd, false, false);
         /* The next round's fill overwrites the arguments just read. */
         mf_barrier(cmd,
                    VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT |
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    VK_ACCESS_SHADER_WRITE_BIT,
                    VK_PIPELINE_STAGE_TRANSFER_BIT |
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT |
                       VK_ACCESS_SHADER_WRITE_BIT);
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
              !strcmp(scenario, "timestamp-barrier") ||
              !strcmp(scenario, "statistics")) {
      bool stats = scenario[0] == 's';
      bool split = !strcmp(scenario, "timestamp-barrier");
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
      if (split)
         compute_barrier(cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
      if (stats)
         vkCmdEndQuery(cmd, qp, 0);
      else
         vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1);
      submit(&c, cmd, scenario);
      vkDestroyQueryPool(c.d.dev, qp, NULL);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "indirect-fill")) {
      indirect(&c, cmd, false, false);
   } else if (!strcmp(scenario, "indirect-update")) {
      indirect(&c, cmd, true, false);
   } else if (!strcmp(scenario, "indirect-dispatch")) {
      indirect(&c, cmd, false, true);
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
   if (c.args_writer.pipe)
      mf_compute_destroy(&c.d, &c.args_writer);
   mf_buffer_destroy(&c.d, &c.buf);
   mf_buffer_destroy(&c.d, &c.args);
   mf_buffer_destroy(&c.d, &c.scratch);
   mf_device_destroy(&c.d);
   unsigned messages = c.mi.messages;
   mf_instance_destroy(&c.mi);
   printf("validation messages: %u\n", messages);
   return messages ? 3 : 0;
}
