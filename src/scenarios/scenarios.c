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
 *   subpass-queries  a render pass whose subpass has a self-dependency:
 *                    clear, an empty compute-invocation query, barrier,
 *                    clear, another such query (skipped with exit 77
 *                    without pipelineStatisticsQuery)
 *   reset-event  dispatch, vkCmdResetEvent, dispatch
 *   query-copy   dispatch, vkCmdWriteTimestamp, vkCmdCopyQueryPoolResults of
 *                that timestamp, barrier to the host; prints timestampPeriod
 *   query-barrier    compute-invocation query around a dispatch,
 *                    vkCmdEndQuery, barrier, dispatch,
 *                    vkCmdCopyQueryPoolResults of the query, barrier to the
 *                    host (skipped with exit 77 without
 *                    pipelineStatisticsQuery)
 *   timeline-waits   one vkQueueSubmit waiting on the same timeline
 *                    semaphores more than once (values past 2^32, equal low
 *                    halves, equal values)
 *   submit-oom-batches  one submission, then one vkQueueSubmit of two
 *                batches the runtime submits apart (a timeline point
 *                between them), submitted again while it says
 *                VK_ERROR_OUT_OF_DEVICE_MEMORY
 *   submit-oom   submits a chain of N dispatches; when
 *                libmesa-fork-failmalloc.so is preloaded, first with the
 *                1st, 2nd, ... host allocation of the driver failing, each
 *                time checking that the queue is still usable; without
 *                it, again while the submission says
 *                VK_ERROR_OUT_OF_DEVICE_MEMORY
 *
 * The scenarios that need Vulkan 1.3 (synchronization2, dynamic rendering)
 * exit with 77 on a device without it.
 * Prints one line per submitted command buffer.
 */

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
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
   bool vk13, timeline;
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
   /* Timeline semaphores, core in Vulkan 1.2, where the device has them. */
   VkPhysicalDeviceVulkan12Features have12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
   };
   if (props.apiVersion >= VK_API_VERSION_1_2) {
      VkPhysicalDeviceFeatures2 f2 = {
         .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
         .pNext = &have12,
      };
      vkGetPhysicalDeviceFeatures2(pd, &f2);
   }
   c->timeline = have12.timelineSemaphore;
   VkPhysicalDeviceVulkan12Features want12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .pNext = c->vk13 ? &want13 : NULL,
      .timelineSemaphore = VK_TRUE,
   };
   mf_device_create_chain(&c->d, pd, 0, &want,
                          c->timeline ? (void *)&want12
                                      : (c->vk13 ? (void *)&want13 : NULL));
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
subpass_query(struct ctx *c, VkCommandBuffer cmd, bool twice)
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
      .queryCount = twice ? 2 : 1,
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
   vkCmdResetQueryPool(cmd, qp, 0, twice ? 2 : 1);

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
   if (twice) {
      /* The query's write opens a compute stream behind the open graphics
       * one; the barrier must end it, or the second query's write, after
       * the second clear, would join it ahead of that clear.
       */
      vkCmdBeginQuery(cmd, qp, 0, 0);
      vkCmdEndQuery(cmd, qp, 0);
   }
   vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                        VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                        VK_DEPENDENCY_BY_REGION_BIT, 1, &self_mb, 0, NULL, 0,
                        NULL);
   if (!twice) {
      vkCmdBeginQuery(cmd, qp, 0, 0);
      vkCmdEndQuery(cmd, qp, 0);
   }
   vkCmdClearAttachments(cmd, 1, &clear, 1, &rect);
   if (twice) {
      vkCmdBeginQuery(cmd, qp, 1, 0);
      vkCmdEndQuery(cmd, qp, 1);
   }
   vkCmdEndRenderPass(cmd);

   mf_barrier(cmd, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
              VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
   bind(c, cmd);
   vkCmdDispatch(cmd, 16, 1, 1);
   mf_submit_wait(&c->d, cmd);
   printf("submitted: %s\n", twice ? "subpass-queries" : "subpass-query");

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

/* dispatch, vkCmdResetEvent, dispatch: the reset is a synchronization
 * command, as vkCmdSetEvent is.
 */
static void
reset_event(struct ctx *c, VkCommandBuffer cmd)
{
   VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
   VkEvent ev;
   MF_CHECK(vkCreateEvent(c->d.dev, &eci, NULL, &ev));
   bind(c, cmd);
   vkCmdDispatch(cmd, 16, 1, 1);
   vkCmdResetEvent(cmd, ev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
   vkCmdDispatch(cmd, 16, 1, 1);
   submit(c, cmd, "reset-event");
   vkDestroyEvent(c->d.dev, ev, NULL);
}

/* Copies the results of query `first` .. `first + count` into c->scratch,
 * then makes them visible to the host.
 */
static void
copy_results(VkCommandBuffer cmd, struct ctx *c, VkQueryPool qp,
             uint32_t first, uint32_t count)
{
   vkCmdCopyQueryPoolResults(cmd, qp, first, count, c->scratch.buf, 0, 8,
                             VK_QUERY_RESULT_64_BIT |
                                VK_QUERY_RESULT_WAIT_BIT);
   mf_barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
              VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
}

/* dispatch, timestamp, copy of the timestamp: the copy must read the
 * timestamp, which is written when its control stream ends.
 */
static void
query_copy(struct ctx *c, VkCommandBuffer cmd)
{
   VkPhysicalDeviceProperties props;
   vkGetPhysicalDeviceProperties(c->d.pd, &props);
   printf("timestampPeriod: %.6f ns\n", props.limits.timestampPeriod);

   VkQueryPoolCreateInfo qpci = {
      .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
      .queryType = VK_QUERY_TYPE_TIMESTAMP,
      .queryCount = 1,
   };
   VkQueryPool qp;
   MF_CHECK(vkCreateQueryPool(c->d.dev, &qpci, NULL, &qp));
   vkCmdResetQueryPool(cmd, qp, 0, 1);
   bind(c, cmd);
   vkCmdDispatch(cmd, 16, 1, 1);
   vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 0);
   copy_results(cmd, c, qp, 0, 1);
   submit(c, cmd, "query-copy");
   vkDestroyQueryPool(c->d.dev, qp, NULL);
}

/* A compute-invocation query around a dispatch, a pipeline barrier right
 * after vkCmdEndQuery, a dispatch, and the copy of the query's result with
 * nothing between it and the dispatch: with merged streams, all of it is
 * one control stream.
 */
static void
query_barrier(struct ctx *c, VkCommandBuffer cmd)
{
   VkQueryPoolCreateInfo qpci = {
      .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
      .queryType = VK_QUERY_TYPE_PIPELINE_STATISTICS,
      .queryCount = 1,
      .pipelineStatistics =
         VK_QUERY_PIPELINE_STATISTIC_COMPUTE_SHADER_INVOCATIONS_BIT,
   };
   VkQueryPool qp;
   MF_CHECK(vkCreateQueryPool(c->d.dev, &qpci, NULL, &qp));
   vkCmdResetQueryPool(cmd, qp, 0, 1);
   bind(c, cmd);
   vkCmdBeginQuery(cmd, qp, 0, 0);
   vkCmdDispatch(cmd, 16, 1, 1);
   vkCmdEndQuery(cmd, qp, 0);
   compute_barrier(cmd);
   vkCmdDispatch(cmd, 16, 1, 1);
   copy_results(cmd, c, qp, 0, 1);
   submit(c, cmd, "query-barrier");
   vkDestroyQueryPool(c->d.dev, qp, NULL);
}

/* A timeline semaphore at 0; exits 77 where the device has none. */
static VkSemaphore
timeline_semaphore(struct ctx *c)
{
   if (!c->timeline) {
      printf("skipped: timelineSemaphore not supported\n");
      exit(77);
   }
   VkSemaphoreTypeCreateInfo tci = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
      .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
   };
   VkSemaphoreCreateInfo sci = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
      .pNext = &tci,
   };
   VkSemaphore sem;
   MF_CHECK(vkCreateSemaphore(c->d.dev, &sci, NULL, &sem));
   return sem;
}

/* One vkQueueSubmit that waits twice on each of three timeline semaphores,
 * signalled from the host beforehand: on 2^32 and 2^32 - 1, on 2^32 + 5
 * and 5 (equal low halves, the higher first), and twice on 7. Waiting on
 * the higher value of each pair covers the other.
 */
static void
timeline_waits(struct ctx *c, VkCommandBuffer cmd)
{
   const uint64_t waits[6] = {0x100000000ull, 0xffffffffull, 0x100000005ull,
                              5, 7, 7};
   const uint64_t reach[3] = {0x100000000ull, 0x100000005ull, 7};
   VkSemaphore sem[3];
   for (unsigned i = 0; i < 3; i++) {
      sem[i] = timeline_semaphore(c);
      VkSemaphoreSignalInfo ssi = {
         .sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
         .semaphore = sem[i],
         .value = reach[i],
      };
      MF_CHECK(vkSignalSemaphore(c->d.dev, &ssi));
   }

   bind(c, cmd);
   vkCmdDispatch(cmd, 16, 1, 1);
   MF_CHECK(vkEndCommandBuffer(cmd));

   VkSemaphore wait_sems[6];
   VkPipelineStageFlags stages[6];
   for (unsigned i = 0; i < 6; i++) {
      wait_sems[i] = sem[i / 2];
      stages[i] = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
   }
   VkTimelineSemaphoreSubmitInfo tsi = {
      .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
      .waitSemaphoreValueCount = 6,
      .pWaitSemaphoreValues = waits,
   };
   VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .pNext = &tsi,
      .waitSemaphoreCount = 6,
      .pWaitSemaphores = wait_sems,
      .pWaitDstStageMask = stages,
      .commandBufferCount = 1,
      .pCommandBuffers = &cmd,
   };
   MF_CHECK(vkQueueSubmit(c->d.queue, 1, &si, VK_NULL_HANDLE));
   MF_CHECK(vkQueueWaitIdle(c->d.queue));
   printf("submitted: timeline-waits\n");
   for (unsigned i = 0; i < 3; i++)
      vkDestroySemaphore(c->d.dev, sem[i], NULL);
}

/* libmesa-fork-failmalloc.so, when preloaded (see src/failmalloc/). */
typedef void (*failmalloc_arm_fn)(unsigned nth, const char *only);
typedef int (*failmalloc_disarm_fn)(void);

/* Submits with the 1st, 2nd, ... host allocation of the driver failing,
 * until one submission needs no more: each must either succeed or say
 * VK_ERROR_OUT_OF_HOST_MEMORY and leave the queue usable (its fence
 * untouched, and an empty submission behind it signalling its own fence),
 * never lose the device. Without the preload, a submission the kernel
 * refuses for want of memory (a shim's ENOMEM) may say
 * VK_ERROR_OUT_OF_DEVICE_MEMORY instead, under the same conditions, and is
 * submitted again.
 */
static void
submit_oom(struct ctx *c, VkCommandBuffer cmd, unsigned count)
{
   failmalloc_arm_fn arm =
      (failmalloc_arm_fn)dlsym(RTLD_DEFAULT, "mf_failmalloc_arm");
   failmalloc_disarm_fn disarm =
      (failmalloc_disarm_fn)dlsym(RTLD_DEFAULT, "mf_failmalloc_disarm");

   bind(c, cmd);
   for (unsigned i = 0; i < count; i++) {
      if (i)
         compute_barrier(cmd);
      vkCmdDispatch(cmd, 16, 1, 1);
   }
   MF_CHECK(vkEndCommandBuffer(cmd));

   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence, empty;
   MF_CHECK(vkCreateFence(c->d.dev, &fci, NULL, &fence));
   MF_CHECK(vkCreateFence(c->d.dev, &fci, NULL, &empty));
   VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &cmd,
   };

   unsigned failed = 0, failed_device = 0;
   for (unsigned nth = 1;; nth++) {
      if (arm && disarm)
         arm(nth, "libvulkan_");
      VkResult r = vkQueueSubmit(c->d.queue, 1, &si, fence);
      bool fired = arm && disarm && disarm();
      if (fired)
         printf("allocation %u failed: %s\n", nth, mf_result_str(r));
      if (r == VK_SUCCESS)
         break;
      if (r == VK_ERROR_OUT_OF_HOST_MEMORY && fired) {
         failed++;
      } else if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY && !fired) {
         printf("submission %u: %s\n", nth, mf_result_str(r));
         failed_device++;
      } else {
         fprintf(stderr, "mesa-fork-scenarios: vkQueueSubmit: %s\n",
                 mf_result_str(r));
         exit(2);
      }

      VkResult status = vkGetFenceStatus(c->d.dev, fence);
      if (status != VK_NOT_READY) {
         fprintf(stderr,
                 "mesa-fork-scenarios: the fence of the failed submission "
                 "is %s, not VK_NOT_READY\n",
                 mf_result_str(status));
         exit(2);
      }
      MF_CHECK(vkQueueSubmit(c->d.queue, 0, NULL, empty));
      MF_CHECK(vkWaitForFences(c->d.dev, 1, &empty, VK_TRUE, UINT64_MAX));
      MF_CHECK(vkResetFences(c->d.dev, 1, &empty));
      if (nth == 10000) {
         fprintf(stderr, "mesa-fork-scenarios: still failing after %u "
                         "allocations\n", nth);
         exit(2);
      }
   }
   MF_CHECK(vkWaitForFences(c->d.dev, 1, &fence, VK_TRUE, UINT64_MAX));
   MF_CHECK(vkQueueWaitIdle(c->d.queue));
   printf("submit-oom: %u submissions out of host memory, %u out of device "
          "memory, then submitted\n",
          failed, failed_device);
   printf("submitted: submit-oom\n");
   vkDestroyFence(c->d.dev, fence, NULL);
   vkDestroyFence(c->d.dev, empty, NULL);
}

/* After one submission that goes, one vkQueueSubmit of two batches the
 * runtime cannot merge (the first signals a timeline point the second
 * waits for), submitted again while it fails with
 * VK_ERROR_OUT_OF_DEVICE_MEMORY: that result must mean nothing of the call
 * went. Any other failure exits 2 naming the result.
 */
static void
submit_oom_batches(struct ctx *c, VkCommandBuffer cmd)
{
   VkSemaphore sem = timeline_semaphore(c);
   VkCommandBuffer cmds[3] = {cmd, begin(c, VK_COMMAND_BUFFER_LEVEL_PRIMARY),
                              begin(c, VK_COMMAND_BUFFER_LEVEL_PRIMARY)};
   for (unsigned i = 0; i < 3; i++) {
      bind(c, cmds[i]);
      vkCmdDispatch(cmds[i], 16, 1, 1);
      /* (mf_submit_wait() ends the third) */
      if (i < 2)
         MF_CHECK(vkEndCommandBuffer(cmds[i]));
   }

   /* A submission of its own first, so that the queue's timeline has
    * moved once: a failed submission that moved it too would leave a point
    * nothing signals (the queue's first point is signalled at its
    * creation, which would hide that).
    */
   mf_submit_wait(&c->d, cmds[2]);
   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence;
   MF_CHECK(vkCreateFence(c->d.dev, &fci, NULL, &fence));
   for (unsigned nth = 1;; nth++) {
      /* Each try signals and waits for a new point. */
      const uint64_t point = nth;
      VkPipelineStageFlags stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
      VkTimelineSemaphoreSubmitInfo signal_values = {
         .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
         .signalSemaphoreValueCount = 1,
         .pSignalSemaphoreValues = &point,
      };
      VkTimelineSemaphoreSubmitInfo wait_values = {
         .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
         .waitSemaphoreValueCount = 1,
         .pWaitSemaphoreValues = &point,
      };
      VkSubmitInfo si[2] = {
         {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .pNext = &signal_values,
            .commandBufferCount = 1,
            .pCommandBuffers = &cmds[0],
            .signalSemaphoreCount = 1,
            .pSignalSemaphores = &sem,
         },
         {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .pNext = &wait_values,
            .waitSemaphoreCount = 1,
            .pWaitSemaphores = &sem,
            .pWaitDstStageMask = &stage,
            .commandBufferCount = 1,
            .pCommandBuffers = &cmds[1],
         },
      };
      VkResult r = vkQueueSubmit(c->d.queue, 2, si, VK_NULL_HANDLE);
      if (r == VK_SUCCESS)
         break;
      if (r != VK_ERROR_OUT_OF_DEVICE_MEMORY || nth == 100) {
         fprintf(stderr, "mesa-fork-scenarios: vkQueueSubmit: %s\n",
                 mf_result_str(r));
         exit(2);
      }
      printf("submission %u: %s\n", nth, mf_result_str(r));

      /* The queue is usable: an empty submission behind the failed one
       * signals its fence (it would wait for a point nothing signals if
       * the failure had moved the queue's timeline).
       */
      MF_CHECK(vkQueueSubmit(c->d.queue, 0, NULL, fence));
      MF_CHECK(vkWaitForFences(c->d.dev, 1, &fence, VK_TRUE, UINT64_MAX));
      MF_CHECK(vkResetFences(c->d.dev, 1, &fence));
   }
   MF_CHECK(vkQueueWaitIdle(c->d.queue));
   printf("submitted: submit-oom-batches\n");
   vkDestroyFence(c->d.dev, fence, NULL);
   vkDestroySemaphore(c->d.dev, sem, NULL);
}

/* Every scenario main() knows, in the order the tests run them. */
static const char *const scenario_names[] = {
   "dispatches", "base", "barrier", "chain", "event", "timestamp",
   "statistics", "indirect-fill", "indirect-update", "indirect-dispatch",
   "secondary", "empty", "exec-barrier", "exec-barrier2", "empty-barrier2",
   "sync2", "events2", "render", "host", "meta", "timestamp-barrier", "mixed",
   "subpass-query", "reset-event", "query-copy", "query-barrier",
   "timeline-waits", "submit-oom", "subpass-queries", "submit-oom-batches",
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
   } else if (!strcmp(scenario, "subpass-query") ||
              !strcmp(scenario, "subpass-queries")) {
      VkPhysicalDeviceFeatures have;
      vkGetPhysicalDeviceFeatures(c.d.pd, &have);
      if (!have.pipelineStatisticsQuery) {
         printf("skipped: pipelineStatisticsQuery not supported\n");
         return 77;
      }
      subpass_query(&c, cmd, !strcmp(scenario, "subpass-queries"));
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
   } else if (!strcmp(scenario, "reset-event")) {
      reset_event(&c, cmd);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "query-copy")) {
      query_copy(&c, cmd);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "query-barrier")) {
      VkPhysicalDeviceFeatures have;
      vkGetPhysicalDeviceFeatures(c.d.pd, &have);
      if (!have.pipelineStatisticsQuery) {
         printf("skipped: pipelineStatisticsQuery not supported\n");
         return 77;
      }
      query_barrier(&c, cmd);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "timeline-waits")) {
      timeline_waits(&c, cmd);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "submit-oom")) {
      submit_oom(&c, cmd, count);
      cmd = VK_NULL_HANDLE;
   } else if (!strcmp(scenario, "submit-oom-batches")) {
      submit_oom_batches(&c, cmd);
      cmd = VK_NULL_HANDLE;
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
