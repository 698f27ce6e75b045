/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-memtypes: which memory type real allocators pick for a readback
 * buffer on each Vulkan device. One JSON line per fact:
 *
 *   {"kind": "type", ...}        every memory type, with its flags and heap
 *   {"kind": "choice", "allocator": "vma", ...}
 *        Vulkan Memory Allocator, asked the way its users ask for readback:
 *        VMA_MEMORY_USAGE_AUTO with HOST_ACCESS_RANDOM
 *   {"kind": "choice", "allocator": "gpu-allocator", ...}
 *        gpu-allocator's rule for MemoryLocation::GpuToCpu (what wgpu uses):
 *        the first type with HOST_VISIBLE|HOST_COHERENT|HOST_CACHED, else
 *        the first with HOST_VISIBLE|HOST_COHERENT
 *   {"kind": "alloc", ...}       with --alloc-each: one allocation of every
 *        host-visible type, 16 + 4 * index MiB large, so that a drm-shim
 *        log can tell which kernel buffer belongs to which type
 */

#include <cstdio>
#include <cstring>
#include <vector>

#define VMA_STATIC_VULKAN_FUNCTIONS 1
#define VMA_DYNAMIC_VULKAN_FUNCTIONS 0
#define VMA_VULKAN_VERSION 1001000
#define VMA_IMPLEMENTATION
#include "vk_mem_alloc.h"

extern "C" {
#include "mf_vk.h"
}

static const VkDeviceSize READBACK_SIZE = 8u << 20;

static void
print_choice(const char *dev, const char *allocator, int index,
             const VkPhysicalDeviceMemoryProperties &mp)
{
   char flags[128] = "none";
   if (index >= 0)
      mf_memory_flags_str(mp.memoryTypes[index].propertyFlags, flags,
                          sizeof(flags));
   printf("{\"kind\": \"choice\", \"device\": \"%s\", \"allocator\": \"%s\", "
          "\"request\": \"readback\", \"index\": %d, \"flags\": \"%s\"}\n",
          dev, allocator, index, flags);
}

/* gpu-allocator (Traverse Research), vulkan find_memorytype_index() for
 * MemoryLocation::GpuToCpu: first fit over the types in index order.
 */
static int
gpu_allocator_gpu_to_cpu(const VkPhysicalDeviceMemoryProperties &mp,
                         uint32_t type_bits)
{
   const VkMemoryPropertyFlags fast = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                      VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
   const VkMemoryPropertyFlags slow = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
   int i = mf_find_memory_type(&mp, type_bits, fast);
   return i >= 0 ? i : mf_find_memory_type(&mp, type_bits, slow);
}

static int
run_device(VkInstance instance, VkPhysicalDevice pd, bool alloc_each)
{
   VkPhysicalDeviceProperties props;
   vkGetPhysicalDeviceProperties(pd, &props);
   const char *name = props.deviceName;

   VkPhysicalDeviceMemoryProperties mp;
   vkGetPhysicalDeviceMemoryProperties(pd, &mp);
   for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
      char flags[128];
      mf_memory_flags_str(mp.memoryTypes[i].propertyFlags, flags,
                          sizeof(flags));
      printf("{\"kind\": \"type\", \"device\": \"%s\", \"index\": %u, "
             "\"flags\": \"%s\", \"heap\": %u}\n",
             name, i, flags, mp.memoryTypes[i].heapIndex);
   }

   uint32_t family = 0;
   float prio = 1.0f;
   VkDeviceQueueCreateInfo qci = {};
   qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
   qci.queueFamilyIndex = family;
   qci.queueCount = 1;
   qci.pQueuePriorities = &prio;
   VkDeviceCreateInfo dci = {};
   dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
   dci.queueCreateInfoCount = 1;
   dci.pQueueCreateInfos = &qci;
   VkDevice dev;
   MF_CHECK(vkCreateDevice(pd, &dci, NULL, &dev));

   VmaAllocatorCreateInfo aci = {};
   aci.vulkanApiVersion = VK_API_VERSION_1_1;
   aci.physicalDevice = pd;
   aci.device = dev;
   aci.instance = instance;
   VmaAllocator vma;
   MF_CHECK(vmaCreateAllocator(&aci, &vma));

   VkBufferCreateInfo bci = {};
   bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
   bci.size = READBACK_SIZE;
   bci.usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
   VmaAllocationCreateInfo vci = {};
   vci.usage = VMA_MEMORY_USAGE_AUTO;
   vci.flags = VMA_ALLOCATION_CREATE_HOST_ACCESS_RANDOM_BIT |
               VMA_ALLOCATION_CREATE_MAPPED_BIT;
   uint32_t vma_index = UINT32_MAX;
   VkResult r = vmaFindMemoryTypeIndexForBufferInfo(vma, &bci, &vci,
                                                    &vma_index);
   print_choice(name, "vma", r == VK_SUCCESS ? (int)vma_index : -1, mp);

   /* The buffer's own requirements, as gpu-allocator sees them. */
   VkBuffer buf;
   MF_CHECK(vkCreateBuffer(dev, &bci, NULL, &buf));
   VkMemoryRequirements req;
   vkGetBufferMemoryRequirements(dev, buf, &req);
   vkDestroyBuffer(dev, buf, NULL);
   print_choice(name, "gpu-allocator", gpu_allocator_gpu_to_cpu(mp, req.memoryTypeBits),
                mp);

   int failures = 0;
   if (alloc_each) {
      for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
         if (!(mp.memoryTypes[i].propertyFlags &
               VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
            continue;
         VkMemoryAllocateInfo ai = {};
         ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
         ai.allocationSize = (VkDeviceSize)(16 + 4 * i) << 20;
         ai.memoryTypeIndex = i;
         VkDeviceMemory mem;
         void *map = NULL;
         r = vkAllocateMemory(dev, &ai, NULL, &mem);
         if (r == VK_SUCCESS) {
            r = vkMapMemory(dev, mem, 0, VK_WHOLE_SIZE, 0, &map);
            if (r == VK_SUCCESS) {
               memset(map, 0x5a, 4096);
               vkUnmapMemory(dev, mem);
            }
            vkFreeMemory(dev, mem, NULL);
         }
         failures += r != VK_SUCCESS;
         printf("{\"kind\": \"alloc\", \"device\": \"%s\", \"index\": %u, "
                "\"size\": %llu, \"result\": \"%s\"}\n",
                name, i, (unsigned long long)ai.allocationSize,
                mf_result_str(r));
      }
   }

   vmaDestroyAllocator(vma);
   vkDestroyDevice(dev, NULL);
   return failures;
}

int
main(int argc, char **argv)
{
   bool alloc_each = false, validate = false;
   for (int i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--alloc-each"))
         alloc_each = true;
      else if (!strcmp(argv[i], "--validate"))
         validate = true;
      else {
         fprintf(stderr, "usage: mesa-fork-memtypes [--alloc-each] [--validate]\n");
         return 64;
      }
   }

   struct mf_instance mi;
   VkResult r = mf_instance_create(&mi, "mesa-fork-memtypes", validate);
   if (r != VK_SUCCESS) {
      fprintf(stderr, "vkCreateInstance: %s\n", mf_result_str(r));
      return 2;
   }
   uint32_t n = 0;
   MF_CHECK(vkEnumeratePhysicalDevices(mi.instance, &n, NULL));
   std::vector<VkPhysicalDevice> pds(n);
   MF_CHECK(vkEnumeratePhysicalDevices(mi.instance, &n, pds.data()));
   if (n == 0) {
      fprintf(stderr, "mesa-fork-memtypes: no Vulkan device\n");
      return 1;
   }
   int failures = 0;
   for (VkPhysicalDevice pd : pds)
      failures += run_device(mi.instance, pd, alloc_each);
   unsigned messages = mi.messages;
   mf_instance_destroy(&mi);
   if (validate && messages) {
      fprintf(stderr, "mesa-fork-memtypes: %u validation message(s)\n", messages);
      return 3;
   }
   return failures ? 1 : 0;
}
