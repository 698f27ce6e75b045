/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-va-probe: how much GPU memory one process can hold. Allocates
 * VkDeviceMemory blocks (256 MiB by default) and binds a buffer to each,
 * until an allocation fails or the target is reached, then prints what it
 * held and the VkResult that stopped it.
 *
 *   mesa-fork-va-probe [--block-mib N] [--target-gib G] [--touch]
 *
 * --touch maps each block and writes its first and last page (on a
 * drm-shim that makes those pages of the shim's sparse backing real). Off
 * by default.
 *
 * Before the first block, after every GiB held and before freeing, it
 * prints a "memory:" line: bytes held, the heap's size, and when the device
 * has VK_EXT_memory_budget the heap's budget and usage, in bytes and GiB
 * ("budget=none usage=none" without it). After freeing every block it
 * prints the same as a "freed:" line: what freeing gave back at once.
 * It also prints maxMemoryAllocationSize and maxBufferSize ("limits:").
 *
 * On Apple hardware, run it with HK_SYSMEM raised (in bytes) to see the VA
 * window rather than Honeykrisp's heap size stop it; the kernel and the
 * machine's RAM still apply.
 *
 * Exit status: 0 when it reached the target, or, without a target, when an
 * out-of-memory result stopped it; 2 when a target was given and not
 * reached; 1 on any other failure; 64 on bad arguments.
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_vk.h"

#define MAX_BLOCKS 16384

static long
rss_mib(void)
{
   FILE *f = fopen("/proc/self/status", "r");
   char line[256];
   long kib = -1;
   while (f && fgets(line, sizeof(line), f)) {
      if (!strncmp(line, "VmRSS:", 6))
         kib = strtol(line + 6, NULL, 10);
   }
   if (f)
      fclose(f);
   return kib < 0 ? -1 : kib / 1024;
}

static bool
has_memory_budget(VkPhysicalDevice pd)
{
   uint32_t count = 0;
   if (vkEnumerateDeviceExtensionProperties(pd, NULL, &count, NULL) !=
       VK_SUCCESS)
      return false;
   VkExtensionProperties *exts = calloc(count ? count : 1, sizeof(*exts));
   bool found = false;
   if (exts && vkEnumerateDeviceExtensionProperties(pd, NULL, &count, exts) ==
                  VK_SUCCESS) {
      for (uint32_t i = 0; i < count; ++i)
         found |= !strcmp(exts[i].extensionName,
                          VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
   }
   free(exts);
   return found;
}

/* One "memory:" line for heap HEAP: what the probe holds, the heap's size,
 * and its budget and usage when the device reports them.
 */
static void
print_memory_as(const char *what, VkPhysicalDevice pd, bool budget,
                uint32_t heap, unsigned long long held)
{
   VkPhysicalDeviceMemoryBudgetPropertiesEXT mb = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT,
   };
   VkPhysicalDeviceMemoryProperties2 mp = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
      .pNext = budget ? &mb : NULL,
   };
   vkGetPhysicalDeviceMemoryProperties2(pd, &mp);
   const double gib = 1ull << 30;
   unsigned long long size = mp.memoryProperties.memoryHeaps[heap].size;
   printf("%s: held=%llu heap=%llu", what, held, size);
   if (budget) {
      unsigned long long b = mb.heapBudget[heap], u = mb.heapUsage[heap];
      printf(" budget=%llu usage=%llu (GiB: held %.2f, heap %.2f, budget "
             "%.2f, usage %.2f)\n",
             b, u, held / gib, size / gib, b / gib, u / gib);
   } else {
      printf(" budget=none usage=none (GiB: held %.2f, heap %.2f; no "
             "VK_EXT_memory_budget)\n",
             held / gib, size / gib);
   }
   fflush(stdout);
}

static void
print_memory(VkPhysicalDevice pd, bool budget, uint32_t heap,
             unsigned long long held)
{
   print_memory_as("memory", pd, budget, heap, held);
}

/* maxMemoryAllocationSize and maxBufferSize (0 without Vulkan 1.3). */
static void
print_limits(VkPhysicalDevice pd)
{
   VkPhysicalDeviceMaintenance4Properties m4 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES,
   };
   VkPhysicalDeviceMaintenance3Properties m3 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
      .pNext = &m4,
   };
   VkPhysicalDeviceProperties2 p2 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
      .pNext = &m3,
   };
   vkGetPhysicalDeviceProperties2(pd, &p2);
   printf("limits: maxMemoryAllocationSize=%llu maxBufferSize=%llu\n",
          (unsigned long long)m3.maxMemoryAllocationSize,
          (unsigned long long)m4.maxBufferSize);
}

static int
usage(void)
{
   fprintf(stderr, "usage: mesa-fork-va-probe [--block-mib N] "
                   "[--target-gib G] [--touch]\n");
   return 64;
}

int
main(int argc, char **argv)
{
   unsigned long long block_mib = 256, target_gib = 0;
   bool touch = false;
   for (int i = 1; i < argc; ++i) {
      char *end = NULL;
      if (!strcmp(argv[i], "--block-mib") && i + 1 < argc) {
         block_mib = strtoull(argv[++i], &end, 10);
         if (*end || block_mib == 0 || block_mib > 4096)
            return usage();
      } else if (!strcmp(argv[i], "--target-gib") && i + 1 < argc) {
         target_gib = strtoull(argv[++i], &end, 10);
         if (*end || target_gib == 0 || target_gib > 4096)
            return usage();
      } else if (!strcmp(argv[i], "--touch")) {
         touch = true;
      } else {
         return usage();
      }
   }

   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-va-probe", false));
   VkPhysicalDevice pd = mf_first_physical_device(&mi, "mesa-fork-va-probe");
   VkPhysicalDeviceProperties props;
   VkPhysicalDeviceDriverProperties drv;
   mf_get_driver_properties(pd, &props, &drv);
   struct mf_device d;
   mf_device_create(&d, pd, NULL);

   VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
   if (touch)
      want |= VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
   int type = mf_find_memory_type(&d.mp, ~0u, want);
   if (type < 0) {
      fprintf(stderr, "mesa-fork-va-probe: no memory type with %s\n",
              touch ? "DEVICE_LOCAL|HOST_VISIBLE" : "DEVICE_LOCAL");
      mf_device_destroy(&d);
      mf_instance_destroy(&mi);
      return 1;
   }
   const VkMemoryHeap *heap =
      &d.mp.memoryHeaps[d.mp.memoryTypes[type].heapIndex];

   printf("device: %s, driver %s (%s)\n", props.deviceName, drv.driverName,
          drv.driverInfo);
   printf("heap: %.2f GiB; blocks of %llu MiB%s%s\n",
          heap->size / (double)(1ull << 30), block_mib,
          touch ? ", first and last page written" : ", not touched",
          target_gib ? "" : ", until an allocation fails");

   print_limits(pd);
   const bool budget = has_memory_budget(pd);
   const uint32_t heap_index = d.mp.memoryTypes[type].heapIndex;
   print_memory(pd, budget, heap_index, 0);

   const VkDeviceSize block = block_mib << 20;
   VkDeviceMemory *mems = calloc(MAX_BLOCKS, sizeof(*mems));
   VkBuffer *bufs = calloc(MAX_BLOCKS, sizeof(*bufs));
   if (!mems || !bufs) {
      fprintf(stderr, "mesa-fork-va-probe: out of host memory\n");
      return 1;
   }
   unsigned n = 0;
   VkResult stop = VK_SUCCESS;
   const char *what = "target reached";

   while (n < MAX_BLOCKS && (!target_gib || n * block < (target_gib << 30))) {
      VkMemoryAllocateInfo mai = {
         .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
         .allocationSize = block,
         .memoryTypeIndex = type,
      };
      stop = vkAllocateMemory(d.dev, &mai, NULL, &mems[n]);
      if (stop != VK_SUCCESS) {
         what = "vkAllocateMemory";
         break;
      }

      VkBufferCreateInfo bci = {
         .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
         .size = block,
         .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
      };
      stop = vkCreateBuffer(d.dev, &bci, NULL, &bufs[n]);
      if (stop == VK_SUCCESS) {
         VkMemoryRequirements req;
         vkGetBufferMemoryRequirements(d.dev, bufs[n], &req);
         if (req.size > block || !(req.memoryTypeBits & (1u << type))) {
            fprintf(stderr,
                    "mesa-fork-va-probe: a %llu MiB buffer needs %llu bytes "
                    "of memory types 0x%x\n",
                    block_mib, (unsigned long long)req.size,
                    req.memoryTypeBits);
            stop = VK_ERROR_UNKNOWN;
         } else {
            stop = vkBindBufferMemory(d.dev, bufs[n], mems[n], 0);
         }
      }
      if (stop != VK_SUCCESS) {
         what = "vkCreateBuffer/vkBindBufferMemory";
         if (bufs[n] != VK_NULL_HANDLE)
            vkDestroyBuffer(d.dev, bufs[n], NULL);
         vkFreeMemory(d.dev, mems[n], NULL);
         break;
      }

      if (touch) {
         void *map;
         stop = vkMapMemory(d.dev, mems[n], 0, VK_WHOLE_SIZE, 0, &map);
         if (stop != VK_SUCCESS) {
            what = "vkMapMemory";
            n++;
            break;
         }
         memset(map, 0xa5, 4096);
         memset((char *)map + block - 4096, 0x5a, 4096);
         vkUnmapMemory(d.dev, mems[n]);
      }
      n++;
      if ((n * block) >> 30 != ((n - 1) * block) >> 30)
         print_memory(pd, budget, heap_index, n * block);
   }
   if (n == MAX_BLOCKS && stop == VK_SUCCESS)
      what = "block limit of the probe";

   printf("held: %.2f GiB in %u blocks; stopped by %s: %s\n",
          n * (double)block / (1ull << 30), n, what, mf_result_str(stop));
   printf("rss: %ld MiB\n", rss_mib());
   print_memory(pd, budget, heap_index, n * block);

   for (unsigned i = 0; i < n; ++i) {
      vkDestroyBuffer(d.dev, bufs[i], NULL);
      vkFreeMemory(d.dev, mems[i], NULL);
   }
   print_memory_as("freed", pd, budget, heap_index, 0);
   free(bufs);
   free(mems);
   mf_device_destroy(&d);
   mf_instance_destroy(&mi);

   bool oom = stop == VK_ERROR_OUT_OF_DEVICE_MEMORY ||
              stop == VK_ERROR_OUT_OF_HOST_MEMORY;
   if (stop != VK_SUCCESS && !oom)
      return 1;
   if (target_gib)
      return n * block >= (target_gib << 30) ? 0 : 2;
   return oom ? 0 : 2;
}
