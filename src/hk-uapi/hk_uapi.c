/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-hk-uapi: exercises the parts of a Vulkan driver that talk to the
 * kernel in ways the mainline drm/asahi uAPI constrains, so that a drm-shim
 * log shows what the driver asked for. Works on any Vulkan device.
 *
 *   mesa-fork-hk-uapi [--validate] CHECK
 *
 *   priority       prints the priorities queue family 0 lists, then creates
 *                  a device with each global queue priority (LOW, MEDIUM,
 *                  HIGH, REALTIME) and prints the VkResult of each
 *   replay-buffer  a buffer created for device-address capture/replay (it
 *                  has a VA of its own, bound to memory at bind time),
 *                  bound to the second half of an allocation twice its
 *                  size (with vkBindBufferMemory2 and a VkBindMemoryStatus),
 *                  destroyed; invalid usage where the feature is not
 *                  supported. A failed bind is printed with both results
 *                  and the buffer's address, and ends the check (exit 2)
 *   sparse         prints the sparse features, properties and queue bits;
 *                  allocates a 256 MiB block and frees it, tries sparse
 *                  buffers and images with each sparse flag and four
 *                  128 GiB sparse buffers (invalid usage where sparse is
 *                  not supported; kept alive if created), queries sparse
 *                  image formats, allocates the 256 MiB block again
 *   semaphores     one submission signals a semaphore; the next waits on
 *                  it, runs three compute streams (dispatches separated by
 *                  pipeline barriers), signals another and a fence
 *   empty-submit   one submission signals a semaphore; a submission of no
 *                  command buffer waits on it and signals a fence, which is
 *                  waited on
 *   sync-fd        a submission's fence exported as a sync file and
 *                  imported into another fence, which is waited on; a
 *                  timeline semaphore signalled to 5 read back (exit 77
 *                  where fences cannot go through sync files)
 *   render         a dispatch, then a dynamic-rendering pass that clears a
 *                  64x32 colour image and a 64x32 D32_SFLOAT depth image
 *                  and stores both, then a dispatch
 *
 * Prints one line per step; exits 0 when every Vulkan call it makes
 * succeeded (for priority: when it could print every result).
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_vk.h"

#include "fill_spv.h"

static const struct {
   VkQueueGlobalPriorityKHR prio;
   const char *name;
} priorities[] = {
   {VK_QUEUE_GLOBAL_PRIORITY_LOW_KHR, "LOW"},
   {VK_QUEUE_GLOBAL_PRIORITY_MEDIUM_KHR, "MEDIUM"},
   {VK_QUEUE_GLOBAL_PRIORITY_HIGH_KHR, "HIGH"},
   {VK_QUEUE_GLOBAL_PRIORITY_REALTIME_KHR, "REALTIME"},
};

static const char *
priority_name(VkQueueGlobalPriorityKHR p)
{
   for (unsigned i = 0; i < sizeof(priorities) / sizeof(priorities[0]); ++i) {
      if (priorities[i].prio == p)
         return priorities[i].name;
   }
   return "?";
}

static int
check_priority(VkPhysicalDevice pd)
{
   /* What queue family 0 lists, then what creating each one gives. */
   VkQueueFamilyGlobalPriorityPropertiesKHR listed = {
      .sType = VK_STRUCTURE_TYPE_QUEUE_FAMILY_GLOBAL_PRIORITY_PROPERTIES_KHR,
   };
   VkQueueFamilyProperties2 family = {
      .sType = VK_STRUCTURE_TYPE_QUEUE_FAMILY_PROPERTIES_2,
      .pNext = &listed,
   };
   uint32_t one_family = 1;
   vkGetPhysicalDeviceQueueFamilyProperties2(pd, &one_family, &family);
   printf("listed priorities:");
   for (uint32_t i = 0; i < listed.priorityCount; ++i)
      printf(" %s", priority_name(listed.priorities[i]));
   printf("\n");

   for (unsigned i = 0; i < sizeof(priorities) / sizeof(priorities[0]); ++i) {
      VkDeviceQueueGlobalPriorityCreateInfoKHR prio = {
         .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_GLOBAL_PRIORITY_CREATE_INFO_KHR,
         .globalPriority = priorities[i].prio,
      };
      float one = 1.0f;
      VkDeviceQueueCreateInfo qci = {
         .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
         .pNext = &prio,
         .queueFamilyIndex = 0,
         .queueCount = 1,
         .pQueuePriorities = &one,
      };
      const char *ext = VK_KHR_GLOBAL_PRIORITY_EXTENSION_NAME;
      VkDeviceCreateInfo dci = {
         .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
         .queueCreateInfoCount = 1,
         .pQueueCreateInfos = &qci,
         .enabledExtensionCount = 1,
         .ppEnabledExtensionNames = &ext,
      };
      VkDevice dev = VK_NULL_HANDLE;
      VkResult r = vkCreateDevice(pd, &dci, NULL, &dev);
      printf("priority %s: %s\n", priorities[i].name, mf_result_str(r));
      if (r == VK_SUCCESS)
         vkDestroyDevice(dev, NULL);
   }
   return 0;
}

/* VK_STRUCTURE_TYPE_BIND_MEMORY_STATUS (Vulkan 1.4, VK_KHR_maintenance6). */
#define STRUCTURE_TYPE_BIND_MEMORY_STATUS 1000545002

static int
check_replay_buffer(VkPhysicalDevice pd)
{
   VkPhysicalDeviceVulkan12Features have12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
   };
   VkPhysicalDeviceFeatures2 have = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
      .pNext = &have12,
   };
   vkGetPhysicalDeviceFeatures2(pd, &have);
   bool replay = have12.bufferDeviceAddressCaptureReplay;
   if (!replay) {
      /* Honeykrisp 25.0.7 does not expose the feature, but a buffer created
       * with the flag still gets a VA of its own that is bound to memory at
       * bind time: the path sparse binding will take. This is invalid usage,
       * so run this check without the validation layer.
       */
      printf("replay-buffer: bufferDeviceAddressCaptureReplay is not "
             "supported; creating the buffer anyway (invalid usage)\n");
   }

   VkPhysicalDeviceVulkan12Features want12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .bufferDeviceAddress = VK_TRUE,
      .bufferDeviceAddressCaptureReplay = replay,
   };
   struct mf_device d;
   mf_device_create_chain(&d, pd, 0, NULL, &want12);
   VkDevice dev = d.dev;

   /* Twice: on memory that ends where the buffer does, and on memory that
    * reaches 64 KiB further, past the buffer's VA and its guard page.
    */
   for (unsigned extra = 0; extra <= 64 * 1024; extra += 64 * 1024) {
      /* 100 KiB: not a multiple of the 16 KiB page, so the buffer's VA (rounded
       * up, plus a guard page) is larger than the memory it is bound to.
       */
      VkBufferCreateInfo bci = {
         .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
         .flags = VK_BUFFER_CREATE_DEVICE_ADDRESS_CAPTURE_REPLAY_BIT,
         .size = 100 * 1024,
         .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                  VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
      };
      VkBuffer buf;
      MF_CHECK(vkCreateBuffer(dev, &bci, NULL, &buf));

      VkMemoryRequirements req;
      vkGetBufferMemoryRequirements(dev, buf, &req);
      int type = mf_find_memory_type(&d.mp, req.memoryTypeBits, 0);

      VkMemoryAllocateFlagsInfo flags = {
         .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
         .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT |
                  (replay ? VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_CAPTURE_REPLAY_BIT
                          : 0),
      };
      /* Bound at an offset: the part of the memory past it is what the bind
       * may cover.
       */
      VkDeviceSize offset = (req.size + req.alignment - 1) / req.alignment *
                            req.alignment;
      VkMemoryAllocateInfo mai = {
         .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
         .pNext = &flags,
         .allocationSize = offset + req.size + extra,
         .memoryTypeIndex = type,
      };
      VkDeviceMemory mem;
      MF_CHECK(vkAllocateMemory(dev, &mai, NULL, &mem));

      /* With VK_KHR_maintenance6's per-bind status (the headers this
       * builds with may predate it).
       */
      VkResult status = VK_RESULT_MAX_ENUM;
      struct {
         VkStructureType sType;
         const void *pNext;
         VkResult *pResult;
      } bind_status = {
         .sType = (VkStructureType)STRUCTURE_TYPE_BIND_MEMORY_STATUS,
         .pResult = &status,
      };
      VkBindBufferMemoryInfo bind = {
         .sType = VK_STRUCTURE_TYPE_BIND_BUFFER_MEMORY_INFO,
         .pNext = &bind_status,
         .buffer = buf,
         .memory = mem,
         .memoryOffset = offset,
      };
      VkResult bound = vkBindBufferMemory2(dev, 1, &bind);

      VkBufferDeviceAddressInfo bdai = {
         .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
         .buffer = buf,
      };
      VkDeviceAddress addr = vkGetBufferDeviceAddress(dev, &bdai);
      if (bound != VK_SUCCESS || status != VK_SUCCESS) {
         /* The buffer's VA is its own from creation: the address is where
          * nothing may stay bound once it is destroyed.
          */
         printf("replay-buffer: bind failed: %s, status %s, address 0x%llx\n",
                mf_result_str(bound), mf_result_str(status),
                (unsigned long long)addr);
         vkDestroyBuffer(dev, buf, NULL);
         printf("replay-buffer: destroyed\n");
         vkFreeMemory(dev, mem, NULL);
         mf_device_destroy(&d);
         return 2;
      }
      printf("replay-buffer: size %llu, memory %llu, offset %llu, address "
             "0x%llx\n",
             (unsigned long long)bci.size, (unsigned long long)mai.allocationSize,
             (unsigned long long)offset, (unsigned long long)addr);

      vkDestroyBuffer(dev, buf, NULL);
      printf("replay-buffer: destroyed\n");
      vkFreeMemory(dev, mem, NULL);
   }
   mf_device_destroy(&d);
   return 0;
}

/* A device with a storage buffer and the fill pipeline writing it. */
struct compute_env {
   struct mf_device d;
   struct mf_buffer buf;
   struct mf_compute comp;
};

static void
compute_env_create(struct compute_env *e, VkPhysicalDevice pd,
                   const void *features)
{
   mf_device_create_chain(&e->d, pd, 0, NULL, features);
   mf_buffer_create(&e->d, 1 << 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0,
                    &e->buf);
   mf_compute_create(&e->d, fill_spv, sizeof(fill_spv), 8, e->buf.buf, NULL, 0,
                     &e->comp);
}

static void
compute_env_destroy(struct compute_env *e)
{
   mf_compute_destroy(&e->d, &e->comp);
   mf_buffer_destroy(&e->d, &e->buf);
   mf_device_destroy(&e->d);
}

static void
dispatch(VkCommandBuffer cmd, const struct compute_env *e)
{
   uint32_t push[2] = {3, 1024};
   mf_compute_bind(cmd, &e->comp, push, sizeof(push));
   vkCmdDispatch(cmd, 1, 1, 1);
}

/* Submits a command buffer of one dispatch that signals `done`. */
static void
submit_dispatch(struct compute_env *e, VkSemaphore done)
{
   VkCommandBuffer cmd = mf_begin(&e->d, VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                  VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
   dispatch(cmd, e);
   MF_CHECK(vkEndCommandBuffer(cmd));
   VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &cmd,
      .signalSemaphoreCount = 1,
      .pSignalSemaphores = &done,
   };
   MF_CHECK(vkQueueSubmit(e->d.queue, 1, &si, VK_NULL_HANDLE));
}

static int
check_semaphores(VkPhysicalDevice pd)
{
   struct compute_env e;
   compute_env_create(&e, pd, NULL);
   struct mf_device d = e.d;

   VkSemaphoreCreateInfo sci = {.sType =
                                   VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
   VkSemaphore first_done, second_done;
   MF_CHECK(vkCreateSemaphore(d.dev, &sci, NULL, &first_done));
   MF_CHECK(vkCreateSemaphore(d.dev, &sci, NULL, &second_done));
   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence;
   MF_CHECK(vkCreateFence(d.dev, &fci, NULL, &fence));

   VkCommandBuffer b = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
   for (unsigned i = 0; i < 3; ++i) {
      if (i)
         mf_barrier(b, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    VK_ACCESS_SHADER_WRITE_BIT,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      dispatch(b, &e);
   }
   MF_CHECK(vkEndCommandBuffer(b));

   submit_dispatch(&e, first_done);

   VkPipelineStageFlags stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
   VkSubmitInfo second = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .waitSemaphoreCount = 1,
      .pWaitSemaphores = &first_done,
      .pWaitDstStageMask = &stage,
      .commandBufferCount = 1,
      .pCommandBuffers = &b,
      .signalSemaphoreCount = 1,
      .pSignalSemaphores = &second_done,
   };
   MF_CHECK(vkQueueSubmit(d.queue, 1, &second, fence));
   MF_CHECK(vkWaitForFences(d.dev, 1, &fence, VK_TRUE, UINT64_MAX));
   MF_CHECK(vkQueueWaitIdle(d.queue));
   printf("semaphores: 1 + 3 compute streams submitted and waited on\n");

   vkDestroyFence(d.dev, fence, NULL);
   vkDestroySemaphore(d.dev, first_done, NULL);
   vkDestroySemaphore(d.dev, second_done, NULL);
   compute_env_destroy(&e);
   return 0;
}

static int
check_empty_submit(VkPhysicalDevice pd)
{
   struct compute_env e;
   compute_env_create(&e, pd, NULL);
   struct mf_device d = e.d;

   VkSemaphoreCreateInfo sci = {.sType =
                                   VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
   VkSemaphore done;
   MF_CHECK(vkCreateSemaphore(d.dev, &sci, NULL, &done));
   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence;
   MF_CHECK(vkCreateFence(d.dev, &fci, NULL, &fence));

   submit_dispatch(&e, done);

   /* No command buffer: the driver passes the wait on to the fence
    * without a SUBMIT.
    */
   VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
   VkSubmitInfo empty = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .waitSemaphoreCount = 1,
      .pWaitSemaphores = &done,
      .pWaitDstStageMask = &stage,
   };
   VkResult r = vkQueueSubmit(d.queue, 1, &empty, fence);
   printf("empty-submit: vkQueueSubmit: %s\n", mf_result_str(r));
   MF_CHECK(r);
   MF_CHECK(vkWaitForFences(d.dev, 1, &fence, VK_TRUE, UINT64_MAX));
   MF_CHECK(vkQueueWaitIdle(d.queue));
   printf("empty-submit: its fence signalled\n");

   vkDestroyFence(d.dev, fence, NULL);
   vkDestroySemaphore(d.dev, done, NULL);
   compute_env_destroy(&e);
   return 0;
}

/* A fence's payload out as a sync file and into another fence
 * (VK_KHR_external_fence_fd), which is then waited on; and a timeline
 * semaphore's counter once a submission signalled it.
 */
static int
check_sync_fd(VkPhysicalDevice pd)
{
   VkPhysicalDeviceExternalFenceInfo efi = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_FENCE_INFO,
      .handleType = VK_EXTERNAL_FENCE_HANDLE_TYPE_SYNC_FD_BIT,
   };
   VkExternalFenceProperties efp = {
      .sType = VK_STRUCTURE_TYPE_EXTERNAL_FENCE_PROPERTIES,
   };
   vkGetPhysicalDeviceExternalFenceProperties(pd, &efi, &efp);
   const VkExternalFenceFeatureFlags both =
      VK_EXTERNAL_FENCE_FEATURE_EXPORTABLE_BIT |
      VK_EXTERNAL_FENCE_FEATURE_IMPORTABLE_BIT;
   if ((efp.externalFenceFeatures & both) != both) {
      printf("sync-fd: sync files not exportable and importable (0x%x)\n",
             efp.externalFenceFeatures);
      return 77;
   }

   VkPhysicalDeviceVulkan12Features v12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .timelineSemaphore = VK_TRUE,
   };
   const char *exts[] = {VK_KHR_EXTERNAL_FENCE_FD_EXTENSION_NAME};
   struct compute_env e;
   mf_device_create_ext(&e.d, pd, 0, NULL, &v12, exts, 1);
   mf_buffer_create(&e.d, 1 << 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0,
                    &e.buf);
   mf_compute_create(&e.d, fill_spv, sizeof(fill_spv), 8, e.buf.buf, NULL, 0,
                     &e.comp);
   struct mf_device d = e.d;
   PFN_vkGetFenceFdKHR get_fd =
      (PFN_vkGetFenceFdKHR)vkGetDeviceProcAddr(d.dev, "vkGetFenceFdKHR");
   PFN_vkImportFenceFdKHR import_fd =
      (PFN_vkImportFenceFdKHR)vkGetDeviceProcAddr(d.dev, "vkImportFenceFdKHR");

   VkExportFenceCreateInfo export_info = {
      .sType = VK_STRUCTURE_TYPE_EXPORT_FENCE_CREATE_INFO,
      .handleTypes = VK_EXTERNAL_FENCE_HANDLE_TYPE_SYNC_FD_BIT,
   };
   VkFenceCreateInfo exportable = {
      .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO,
      .pNext = &export_info,
   };
   VkFenceCreateInfo plain = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence done, imported;
   MF_CHECK(vkCreateFence(d.dev, &exportable, NULL, &done));
   MF_CHECK(vkCreateFence(d.dev, &plain, NULL, &imported));

   VkCommandBuffer b = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
   dispatch(b, &e);
   MF_CHECK(vkEndCommandBuffer(b));
   VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &b,
   };
   MF_CHECK(vkQueueSubmit(d.queue, 1, &si, done));

   VkFenceGetFdInfoKHR gfi = {
      .sType = VK_STRUCTURE_TYPE_FENCE_GET_FD_INFO_KHR,
      .fence = done,
      .handleType = VK_EXTERNAL_FENCE_HANDLE_TYPE_SYNC_FD_BIT,
   };
   int fd = -1;
   VkResult r = get_fd(d.dev, &gfi, &fd);
   printf("sync-fd: vkGetFenceFdKHR: %s\n", mf_result_str(r));
   MF_CHECK(r);
   /* -1 would be an already signalled payload: the point is a real file
    * going through the kernel's import.
    */
   printf("sync-fd: exported a file: %s\n", fd >= 0 ? "yes" : "no (-1)");

   VkImportFenceFdInfoKHR ifi = {
      .sType = VK_STRUCTURE_TYPE_IMPORT_FENCE_FD_INFO_KHR,
      .fence = imported,
      .flags = VK_FENCE_IMPORT_TEMPORARY_BIT,
      .handleType = VK_EXTERNAL_FENCE_HANDLE_TYPE_SYNC_FD_BIT,
      .fd = fd,
   };
   r = import_fd(d.dev, &ifi);
   printf("sync-fd: vkImportFenceFdKHR: %s\n", mf_result_str(r));
   MF_CHECK(r);
   r = vkWaitForFences(d.dev, 1, &imported, VK_TRUE, UINT64_MAX);
   printf("sync-fd: vkWaitForFences on the imported payload: %s\n",
          mf_result_str(r));
   MF_CHECK(r);

   /* A timeline semaphore signalled to 5 by a submission reads 5. */
   VkSemaphoreTypeCreateInfo tci = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
      .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
   };
   VkSemaphoreCreateInfo timeline = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
      .pNext = &tci,
   };
   VkSemaphore tl;
   MF_CHECK(vkCreateSemaphore(d.dev, &timeline, NULL, &tl));
   uint64_t five = 5;
   VkTimelineSemaphoreSubmitInfo tsi = {
      .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
      .signalSemaphoreValueCount = 1,
      .pSignalSemaphoreValues = &five,
   };
   VkSubmitInfo sig = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .pNext = &tsi,
      .signalSemaphoreCount = 1,
      .pSignalSemaphores = &tl,
   };
   MF_CHECK(vkQueueSubmit(d.queue, 1, &sig, VK_NULL_HANDLE));
   MF_CHECK(vkQueueWaitIdle(d.queue));
   uint64_t value = 0;
   MF_CHECK(vkGetSemaphoreCounterValue(d.dev, tl, &value));
   printf("sync-fd: timeline counter %llu\n", (unsigned long long)value);

   vkDestroySemaphore(d.dev, tl, NULL);
   vkDestroyFence(d.dev, done, NULL);
   vkDestroyFence(d.dev, imported, NULL);
   compute_env_destroy(&e);
   return 0;
}

static VkDeviceMemory
alloc_block(struct mf_device *d, VkDeviceSize size)
{
   VkMemoryAllocateInfo mai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = size,
      .memoryTypeIndex = mf_find_memory_type(
         &d->mp, ~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT),
   };
   VkDeviceMemory mem;
   MF_CHECK(vkAllocateMemory(d->dev, &mai, NULL, &mem));
   return mem;
}

static int
check_sparse(VkPhysicalDevice pd)
{
   /* What the device advertises: every sparse feature and property, and
    * the sparse binding bit of each queue family.
    */
   VkPhysicalDeviceFeatures f;
   vkGetPhysicalDeviceFeatures(pd, &f);
   unsigned features = f.sparseBinding + f.sparseResidencyBuffer +
                       f.sparseResidencyImage2D + f.sparseResidencyImage3D +
                       f.sparseResidency2Samples + f.sparseResidency4Samples +
                       f.sparseResidency8Samples + f.sparseResidency16Samples +
                       f.sparseResidencyAliased;
   VkPhysicalDeviceProperties props;
   vkGetPhysicalDeviceProperties(pd, &props);
   const VkPhysicalDeviceSparseProperties *sp = &props.sparseProperties;
   unsigned properties = sp->residencyStandard2DBlockShape +
                         sp->residencyStandard2DMultisampleBlockShape +
                         sp->residencyStandard3DBlockShape +
                         sp->residencyAlignedMipSize +
                         sp->residencyNonResidentStrict;
   uint32_t nfam = 0;
   vkGetPhysicalDeviceQueueFamilyProperties(pd, &nfam, NULL);
   VkQueueFamilyProperties fams[16];
   nfam = nfam > 16 ? 16 : nfam;
   vkGetPhysicalDeviceQueueFamilyProperties(pd, &nfam, fams);
   unsigned queues = 0;
   for (uint32_t i = 0; i < nfam; ++i)
      queues += !!(fams[i].queueFlags & VK_QUEUE_SPARSE_BINDING_BIT);
   printf("sparse features: %u, sparse properties: %u, sparse queue "
          "families: %u\n",
          features, properties, queues);

   struct mf_device d;
   mf_device_create(&d, pd, NULL);
   const VkDeviceSize block = 256ull << 20;

   vkFreeMemory(d.dev, alloc_block(&d, block), NULL);
   printf("sparse: allocated and freed a %llu MiB block\n",
          (unsigned long long)(block >> 20));

   /* Each sparse flag alone (invalid usage: the features are off), and four
    * buffers of the 128 GiB limit, kept alive: together more than the main
    * heap, should creating them reserve VA.
    */
   static const struct {
      const char *name;
      VkBufferCreateFlags buffer;
      VkImageCreateFlags image;
   } flags[] = {
      {"binding", VK_BUFFER_CREATE_SPARSE_BINDING_BIT,
       VK_IMAGE_CREATE_SPARSE_BINDING_BIT},
      {"residency", VK_BUFFER_CREATE_SPARSE_RESIDENCY_BIT,
       VK_IMAGE_CREATE_SPARSE_RESIDENCY_BIT},
      {"aliased", VK_BUFFER_CREATE_SPARSE_ALIASED_BIT,
       VK_IMAGE_CREATE_SPARSE_ALIASED_BIT},
   };
   VkBuffer bufs[4 + 3] = {VK_NULL_HANDLE};
   VkImage imgs[3] = {VK_NULL_HANDLE};
   unsigned nbufs = 0;
   for (unsigned i = 0; i < 3; ++i) {
      VkBufferCreateInfo bci = {
         .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
         .flags = flags[i].buffer,
         .size = 64ull << 20,
         .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
      };
      VkResult r = vkCreateBuffer(d.dev, &bci, NULL, &bufs[nbufs++]);
      printf("sparse buffer (%s): %s\n", flags[i].name, mf_result_str(r));
   }
   unsigned big = 0;
   for (unsigned i = 0; i < 4; ++i) {
      VkBufferCreateInfo bci = {
         .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
         .flags = VK_BUFFER_CREATE_SPARSE_BINDING_BIT,
         .size = 128ull << 30,
         .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
      };
      big += vkCreateBuffer(d.dev, &bci, NULL, &bufs[nbufs++]) == VK_SUCCESS;
   }
   printf("sparse 128 GiB buffers created: %u of 4\n", big);

   VkImageCreateInfo ici = mf_image_2d_info(1024, 1024, VK_FORMAT_R8G8B8A8_UNORM,
                                            VK_IMAGE_USAGE_SAMPLED_BIT);
   for (unsigned i = 0; i < 3; ++i) {
      ici.flags = flags[i].image;
      VkResult r = vkCreateImage(d.dev, &ici, NULL, &imgs[i]);
      printf("sparse image (%s): %s\n", flags[i].name, mf_result_str(r));
   }

   uint32_t count = ~0u;
   vkGetPhysicalDeviceSparseImageFormatProperties(
      pd, ici.format, ici.imageType, ici.samples, ici.usage, ici.tiling,
      &count, NULL);
   printf("sparse image formats: %u\n", count);

   VkDeviceMemory again = alloc_block(&d, block);
   printf("sparse: allocated the %llu MiB block again\n",
          (unsigned long long)(block >> 20));

   vkFreeMemory(d.dev, again, NULL);
   for (unsigned i = 0; i < 3; ++i) {
      if (imgs[i] != VK_NULL_HANDLE)
         vkDestroyImage(d.dev, imgs[i], NULL);
   }
   for (unsigned i = 0; i < nbufs; ++i) {
      if (bufs[i] != VK_NULL_HANDLE)
         vkDestroyBuffer(d.dev, bufs[i], NULL);
   }
   mf_device_destroy(&d);
   return 0;
}

static int
check_render(VkPhysicalDevice pd)
{
   VkPhysicalDeviceVulkan13Features want13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
      .dynamicRendering = VK_TRUE,
      .synchronization2 = VK_TRUE,
   };
   struct compute_env e;
   compute_env_create(&e, pd, &want13);
   struct mf_device d = e.d;

   struct mf_image img, depth;
   mf_image_2d_create(&d, 64, 32, VK_FORMAT_R8G8B8A8_UNORM,
                      VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT, &img);
   mf_image_2d_create(&d, 64, 32, VK_FORMAT_D32_SFLOAT,
                      VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT, &depth);

   VkCommandBuffer cmd = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                  VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
   dispatch(cmd, &e);

   mf_to_color_attachment(cmd, &img, VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
                          VK_ACCESS_2_SHADER_WRITE_BIT);
   mf_to_color_attachment(cmd, &depth, VK_PIPELINE_STAGE_2_NONE, 0);
   /* One pass clears and stores both, so that the render command carries
    * a depth buffer. */
   mf_clear_pass_with_depth(cmd, &img, &depth);

   mf_barrier(cmd, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
              VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
   dispatch(cmd, &e);
   mf_submit_wait(&d, cmd);
   printf("render: dispatch, clear 64x32 colour and depth, dispatch "
          "submitted\n");

   mf_image_destroy(&d, &depth);
   mf_image_destroy(&d, &img);
   compute_env_destroy(&e);
   return 0;
}

int
main(int argc, char **argv)
{
   bool validate = false;
   const char *check = NULL;
   for (int i = 1; i < argc; ++i) {
      if (!strcmp(argv[i], "--validate"))
         validate = true;
      else if (!check && argv[i][0] != '-')
         check = argv[i];
      else
         check = NULL, argc = 0;
   }
   if (!check) {
      fprintf(stderr, "usage: mesa-fork-hk-uapi [--validate] "
                      "priority|replay-buffer|sparse|semaphores|empty-submit|render\n");
      return 2;
   }

   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-hk-uapi", validate));
   VkPhysicalDevice pd = mf_first_physical_device(&mi, "mesa-fork-hk-uapi");

   int ret;
   if (!strcmp(check, "priority"))
      ret = check_priority(pd);
   else if (!strcmp(check, "replay-buffer"))
      ret = check_replay_buffer(pd);
   else if (!strcmp(check, "sparse"))
      ret = check_sparse(pd);
   else if (!strcmp(check, "semaphores"))
      ret = check_semaphores(pd);
   else if (!strcmp(check, "empty-submit"))
      ret = check_empty_submit(pd);
   else if (!strcmp(check, "render"))
      ret = check_render(pd);
   else if (!strcmp(check, "sync-fd"))
      ret = check_sync_fd(pd);
   else {
      fprintf(stderr, "mesa-fork-hk-uapi: unknown check \"%s\"\n", check);
      ret = 2;
   }

   unsigned messages = mi.messages;
   mf_instance_destroy(&mi);
   if (validate && messages) {
      fprintf(stderr, "mesa-fork-hk-uapi: %u validation messages\n", messages);
      return 3;
   }
   return ret;
}
