/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-va-probe: how much GPU memory one process can hold. Allocates
 * VkDeviceMemory blocks (256 MiB by default) and binds a buffer to each,
 * until an allocation fails or the target is reached, then prints what it
 * held and the VkResult that stopped it.
 *
 *   mesa-fork-va-probe [--block-mib N] [--target-gib G | --target-mib M]
 *                      [--touch] [--threads T] [--again [--again-block-mib N]]
 *   mesa-fork-va-probe --share MIB
 *
 * --touch maps each block and writes its first and last page (on a
 * drm-shim that makes those pages of the shim's sparse backing real). Off
 * by default.
 *
 * --threads T allocates with T threads in lockstep: in each step every
 * thread allocates one block at the same moment, until one of them fails
 * or the target is reached; what two threads allocating at once get from
 * the driver's checks (on a machine with little memory left, nothing that
 * the kernel then cannot pin).
 *
 * --again, after freeing, allocates once more to the same target (with
 * --again-block-mib, in blocks of that size) and prints the result as an
 * "again:" line, then frees: what an application that unloads a model and
 * loads one again can have, after a failure too.
 *
 * Before the first block, after every GiB held and before freeing, it
 * prints a "memory:" line: bytes held, the heap's size, and when the device
 * has VK_EXT_memory_budget the heap's budget and usage, in bytes and GiB
 * ("budget=none usage=none" without it). After freeing every block it
 * prints the same as a "freed:" line: what freeing gave back at once.
 * It also prints maxMemoryAllocationSize and maxBufferSize ("limits:").
 *
 * --share MIB does none of that: it follows one block of MIB MiB shared
 * between two VkDevices of the same GPU (VK_KHR_external_memory_fd, an
 * opaque fd), as two processes or APIs sharing a buffer would. The first
 * device allocates and writes it and exports an fd, the second imports it,
 * checks what the first wrote and writes its own; the first device then
 * imports a second fd of the same block itself, and frees both of its
 * handles, the second last. After each step a "share:" line gives
 * MemAvailable (what the machine has left: pinned memory counts against
 * it), the heap's usage when the device reports it, and whether the block
 * held what was last written (contents=ok|wrong, "-" before anything is).
 * Exit status 0 when every check held, 1 when one did not or a call
 * failed, 3 when the device cannot share memory through an opaque fd.
 *
 * On Apple hardware, run it with HK_SYSMEM raised (in bytes) to see the VA
 * window rather than Honeykrisp's heap size stop it; the kernel and the
 * machine's RAM still apply.
 *
 * Exit status (of the first round): 0 when it reached the target, or,
 * without a target, when an out-of-memory result stopped it; 2 when a
 * target was given and not reached; 1 on any other failure; 64 on bad
 * arguments.
 */

#define _POSIX_C_SOURCE 200809L /* pthread barriers in strict C11 */

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_vk.h"

#define MAX_BLOCKS 16384
#define MAX_THREADS 16

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
has_extension(VkPhysicalDevice pd, const char *name)
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
         found |= !strcmp(exts[i].extensionName, name);
   }
   free(exts);
   return found;
}

static bool
has_memory_budget(VkPhysicalDevice pd)
{
   return has_extension(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
}

/* Heap HEAP's size, and with budget its budget and usage (else 0). */
static void
query_heap(VkPhysicalDevice pd, bool budget, uint32_t heap,
           unsigned long long *size, unsigned long long *budget_B,
           unsigned long long *usage_B)
{
   VkPhysicalDeviceMemoryBudgetPropertiesEXT mb = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT,
   };
   VkPhysicalDeviceMemoryProperties2 mp = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
      .pNext = budget ? &mb : NULL,
   };
   vkGetPhysicalDeviceMemoryProperties2(pd, &mp);
   *size = mp.memoryProperties.memoryHeaps[heap].size;
   *budget_B = budget ? mb.heapBudget[heap] : 0;
   *usage_B = budget ? mb.heapUsage[heap] : 0;
}

/* One "memory:" line for heap HEAP: what the probe holds, the heap's size,
 * and its budget and usage when the device reports them.
 */
static void
print_memory_as(const char *what, VkPhysicalDevice pd, bool budget,
                uint32_t heap, unsigned long long held)
{
   const double gib = 1ull << 30;
   unsigned long long size, b, u;
   query_heap(pd, budget, heap, &size, &b, &u);
   printf("%s: held=%llu heap=%llu", what, held, size);
   if (budget) {
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
                   "[--target-gib G | --target-mib M] [--touch] "
                   "[--threads T] [--again [--again-block-mib N]]\n"
                   "       mesa-fork-va-probe --share MIB\n");
   return 64;
}

/* MemAvailable of /proc/meminfo in bytes, or -1. */
static long long
mem_available(void)
{
   FILE *f = fopen("/proc/meminfo", "r");
   char line[256];
   long long kib = -1;
   while (f && fgets(line, sizeof(line), f)) {
      if (!strncmp(line, "MemAvailable:", 13))
         kib = strtoll(line + 13, NULL, 10);
   }
   if (f)
      fclose(f);
   return kib < 0 ? -1 : kib * 1024;
}

/* What a device wrote: word i of the block's first and last page. */
static uint32_t
share_word(uint32_t seed, size_t i)
{
   return seed * 0x9e3779b9u ^ (uint32_t)i;
}

static void
share_write(void *map, VkDeviceSize size, uint32_t seed)
{
   const size_t words = 4096 / 4;
   uint32_t *first = map, *last = (uint32_t *)((char *)map + size - 4096);
   for (size_t i = 0; i < words; ++i) {
      first[i] = share_word(seed, i);
      last[i] = share_word(seed, words + i);
   }
}

static bool
share_holds(const void *map, VkDeviceSize size, uint32_t seed)
{
   const size_t words = 4096 / 4;
   const uint32_t *first = map;
   const uint32_t *last = (const uint32_t *)((const char *)map + size - 4096);
   for (size_t i = 0; i < words; ++i) {
      if (first[i] != share_word(seed, i) ||
          last[i] != share_word(seed, words + i))
         return false;
   }
   return true;
}

static void
share_line(const char *step, VkPhysicalDevice pd, bool budget, uint32_t heap,
           const char *contents)
{
   unsigned long long size, b, u;
   query_heap(pd, budget, heap, &size, &b, &u);
   printf("share: %s avail=%lld", step, mem_available());
   if (budget)
      printf(" usage=%llu", u);
   else
      printf(" usage=none");
   printf(" contents=%s\n", contents);
   fflush(stdout);
}

/* Imports fd (which the driver then owns) as memory of the given type. */
static VkResult
share_import(VkDevice dev, int fd, VkDeviceSize size, uint32_t type,
             VkDeviceMemory *mem)
{
   VkImportMemoryFdInfoKHR import = {
      .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
      .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
      .fd = fd,
   };
   VkMemoryAllocateInfo mai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .pNext = &import,
      .allocationSize = size,
      .memoryTypeIndex = type,
   };
   return vkAllocateMemory(dev, &mai, NULL, mem);
}

#define SHARE_CHECK(call)                                                      \
   do {                                                                        \
      VkResult r_ = (call);                                                    \
      if (r_ != VK_SUCCESS) {                                                  \
         fprintf(stderr, "mesa-fork-va-probe: %s: %s\n", #call,                \
                 mf_result_str(r_));                                           \
         return 1;                                                             \
      }                                                                        \
   } while (0)

static int
share_block(VkPhysicalDevice pd, VkDeviceSize size)
{
   const char *ext = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
   if (!has_extension(pd, ext)) {
      printf("share: unsupported (no %s)\n", ext);
      return 3;
   }
   VkPhysicalDeviceExternalBufferInfo ebi = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
      .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
   };
   VkExternalBufferProperties ebp = {
      .sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES,
   };
   vkGetPhysicalDeviceExternalBufferProperties(pd, &ebi, &ebp);
   const VkExternalMemoryFeatureFlags both =
      VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT |
      VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT;
   if ((ebp.externalMemoryProperties.externalMemoryFeatures & both) != both) {
      printf("share: unsupported (opaque fd buffers not exportable and "
             "importable)\n");
      return 3;
   }

   struct mf_device a, b;
   mf_device_create_ext(&a, pd, 0, NULL, NULL, &ext, 1);
   mf_device_create_ext(&b, pd, 0, NULL, NULL, &ext, 1);
   PFN_vkGetMemoryFdKHR get_fd =
      (PFN_vkGetMemoryFdKHR)vkGetDeviceProcAddr(a.dev, "vkGetMemoryFdKHR");
   int type = mf_find_memory_type(&a.mp, ~0u,
                                  VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
   if (!get_fd || type < 0) {
      fprintf(stderr, "mesa-fork-va-probe: no vkGetMemoryFdKHR or no "
                      "DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT type\n");
      return 1;
   }
   const uint32_t heap = a.mp.memoryTypes[type].heapIndex;
   const bool budget = has_memory_budget(pd);

   printf("share: %llu MiB of memory type %d between two devices\n",
          (unsigned long long)(size >> 20), type);
   share_line("before", pd, budget, heap, "-");

   VkExportMemoryAllocateInfo export = {
      .sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
      .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
   };
   VkMemoryAllocateInfo mai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .pNext = &export,
      .allocationSize = size,
      .memoryTypeIndex = type,
   };
   VkDeviceMemory mem_a, mem_b, mem_a2;
   void *map_a, *map_b, *map_a2;
   SHARE_CHECK(vkAllocateMemory(a.dev, &mai, NULL, &mem_a));
   SHARE_CHECK(vkMapMemory(a.dev, mem_a, 0, VK_WHOLE_SIZE, 0, &map_a));
   share_write(map_a, size, 1);
   VkMemoryGetFdInfoKHR gfi = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
      .memory = mem_a,
      .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
   };
   int fd = -1, fd2 = -1;
   SHARE_CHECK(get_fd(a.dev, &gfi, &fd));
   share_line("exported", pd, budget, heap,
              share_holds(map_a, size, 1) ? "ok" : "wrong");

   bool all = true, held;
   SHARE_CHECK(share_import(b.dev, fd, size, type, &mem_b));
   SHARE_CHECK(vkMapMemory(b.dev, mem_b, 0, VK_WHOLE_SIZE, 0, &map_b));
   held = share_holds(map_b, size, 1);
   all &= held;
   share_line("imported", pd, budget, heap, held ? "ok" : "wrong");

   share_write(map_b, size, 2);
   held = share_holds(map_a, size, 2);
   all &= held;
   share_line("written-by-importer", pd, budget, heap, held ? "ok" : "wrong");

   SHARE_CHECK(get_fd(a.dev, &gfi, &fd2));
   SHARE_CHECK(share_import(a.dev, fd2, size, type, &mem_a2));
   SHARE_CHECK(vkMapMemory(a.dev, mem_a2, 0, VK_WHOLE_SIZE, 0, &map_a2));
   held = share_holds(map_a2, size, 2);
   all &= held;
   share_line("imported-by-exporter", pd, budget, heap, held ? "ok" : "wrong");

   vkUnmapMemory(a.dev, mem_a);
   vkFreeMemory(a.dev, mem_a, NULL);
   vkUnmapMemory(a.dev, mem_a2);
   vkFreeMemory(a.dev, mem_a2, NULL);
   held = share_holds(map_b, size, 2);
   all &= held;
   share_line("exporter-freed", pd, budget, heap, held ? "ok" : "wrong");

   vkUnmapMemory(b.dev, mem_b);
   vkFreeMemory(b.dev, mem_b, NULL);
   share_line("importer-freed", pd, budget, heap, "-");

   mf_device_destroy(&b);
   mf_device_destroy(&a);
   return all ? 0 : 1;
}

/* One round of allocations: blocks of `block` bytes of memory type `type`
 * up to `target` bytes (0: until one fails), each with a buffer bound to
 * it, made by `threads` threads in lockstep.
 */
struct round {
   struct mf_device *d;
   int type;
   VkDeviceSize block, target;
   bool touch;
   unsigned threads;

   pthread_barrier_t barrier;
   pthread_mutex_t lock;
   VkDeviceMemory *mems;
   VkBuffer *bufs;
   unsigned n;        /* blocks held */
   bool done;         /* a thread failed, or the target is reached */
   VkResult stop;     /* the first failure's result */
   const char *what;  /* and what failed */
};

/* Allocates, binds and (with touch) writes one block; returns the result
 * and, on failure, what failed.
 */
static VkResult
hold_block(struct round *r, VkDeviceMemory *mem, VkBuffer *buf,
           const char **what)
{
   VkDevice dev = r->d->dev;
   *mem = VK_NULL_HANDLE;
   *buf = VK_NULL_HANDLE;
   VkMemoryAllocateInfo mai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = r->block,
      .memoryTypeIndex = r->type,
   };
   VkResult res = vkAllocateMemory(dev, &mai, NULL, mem);
   if (res != VK_SUCCESS) {
      *what = "vkAllocateMemory";
      *mem = VK_NULL_HANDLE;
      return res;
   }

   VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = r->block,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
   };
   res = vkCreateBuffer(dev, &bci, NULL, buf);
   if (res == VK_SUCCESS) {
      VkMemoryRequirements req;
      vkGetBufferMemoryRequirements(dev, *buf, &req);
      if (req.size > r->block || !(req.memoryTypeBits & (1u << r->type))) {
         fprintf(stderr,
                 "mesa-fork-va-probe: a %llu MiB buffer needs %llu bytes "
                 "of memory types 0x%x\n",
                 (unsigned long long)(r->block >> 20),
                 (unsigned long long)req.size, req.memoryTypeBits);
         res = VK_ERROR_UNKNOWN;
      } else {
         res = vkBindBufferMemory(dev, *buf, *mem, 0);
      }
   }
   if (res != VK_SUCCESS) {
      *what = "vkCreateBuffer/vkBindBufferMemory";
      if (*buf != VK_NULL_HANDLE)
         vkDestroyBuffer(dev, *buf, NULL);
      vkFreeMemory(dev, *mem, NULL);
      *mem = VK_NULL_HANDLE;
      *buf = VK_NULL_HANDLE;
      return res;
   }

   if (r->touch) {
      void *map;
      res = vkMapMemory(dev, *mem, 0, VK_WHOLE_SIZE, 0, &map);
      if (res != VK_SUCCESS) {
         /* The block is held; only writing it failed. */
         *what = "vkMapMemory";
         return res;
      }
      memset(map, 0xa5, 4096);
      memset((char *)map + r->block - 4096, 0x5a, 4096);
      vkUnmapMemory(dev, *mem);
   }
   return VK_SUCCESS;
}

static void *
round_thread(void *data)
{
   struct round *r = data;
   for (;;) {
      /* Every thread allocates at the same moment... */
      pthread_barrier_wait(&r->barrier);
      pthread_mutex_lock(&r->lock);
      bool go = !r->done && r->n < MAX_BLOCKS &&
                (!r->target || r->n * r->block < r->target);
      unsigned slot = r->n;
      if (go)
         r->n++; /* the slot is this thread's, held or not */
      pthread_mutex_unlock(&r->lock);
      /* (every thread has taken its slot before any allocates) */
      pthread_barrier_wait(&r->barrier);

      VkDeviceMemory mem = VK_NULL_HANDLE;
      VkBuffer buf = VK_NULL_HANDLE;
      const char *what = NULL;
      VkResult res = go ? hold_block(r, &mem, &buf, &what) : VK_SUCCESS;

      pthread_mutex_lock(&r->lock);
      if (go) {
         r->mems[slot] = mem;
         r->bufs[slot] = buf;
         if (res != VK_SUCCESS && r->stop == VK_SUCCESS) {
            r->stop = res;
            r->what = what;
         }
      }
      if (!go || res != VK_SUCCESS)
         r->done = true;
      pthread_mutex_unlock(&r->lock);

      /* ...and all see whether one of them failed before the next step. */
      pthread_barrier_wait(&r->barrier);
      pthread_mutex_lock(&r->lock);
      bool done = r->done;
      pthread_mutex_unlock(&r->lock);
      if (done)
         return NULL;
   }
}

/* Runs the round; returns the blocks held (mems[i] may be VK_NULL_HANDLE
 * where a thread's allocation failed).
 */
static void
run_round(struct round *r, VkPhysicalDevice pd, bool budget, uint32_t heap,
          bool report)
{
   r->n = 0;
   r->done = false;
   r->stop = VK_SUCCESS;
   r->what = "target reached";
   memset(r->mems, 0, MAX_BLOCKS * sizeof(*r->mems));
   memset(r->bufs, 0, MAX_BLOCKS * sizeof(*r->bufs));

   if (r->threads > 1) {
      pthread_t tids[MAX_THREADS];
      if (pthread_barrier_init(&r->barrier, NULL, r->threads)) {
         fprintf(stderr, "mesa-fork-va-probe: no barrier for %u threads\n",
                 r->threads);
         exit(1);
      }
      for (unsigned t = 0; t < r->threads; ++t) {
         if (pthread_create(&tids[t], NULL, round_thread, r)) {
            /* The others would wait at the barrier for ever. */
            fprintf(stderr, "mesa-fork-va-probe: cannot start thread %u\n", t);
            exit(1);
         }
      }
      for (unsigned t = 0; t < r->threads; ++t)
         pthread_join(tids[t], NULL);
      pthread_barrier_destroy(&r->barrier);
      if (r->n == MAX_BLOCKS && r->stop == VK_SUCCESS)
         r->what = "block limit of the probe";
      return;
   }

   while (r->n < MAX_BLOCKS && (!r->target || r->n * r->block < r->target)) {
      const char *what = NULL;
      VkResult res = hold_block(r, &r->mems[r->n], &r->bufs[r->n], &what);
      if (r->mems[r->n] != VK_NULL_HANDLE)
         r->n++;
      if (res != VK_SUCCESS) {
         r->stop = res;
         r->what = what;
         return;
      }
      if (report && (r->n * r->block) >> 30 != ((r->n - 1) * r->block) >> 30)
         print_memory(pd, budget, heap, r->n * r->block);
   }
   if (r->n == MAX_BLOCKS)
      r->what = "block limit of the probe";
}

static unsigned
blocks_held(const struct round *r)
{
   unsigned held = 0;
   for (unsigned i = 0; i < r->n; ++i)
      held += r->mems[i] != VK_NULL_HANDLE;
   return held;
}

static void
free_round(struct round *r)
{
   for (unsigned i = 0; i < r->n; ++i) {
      if (r->bufs[i] != VK_NULL_HANDLE)
         vkDestroyBuffer(r->d->dev, r->bufs[i], NULL);
      if (r->mems[i] != VK_NULL_HANDLE)
         vkFreeMemory(r->d->dev, r->mems[i], NULL);
   }
}

static bool
parse_count(const char *arg, unsigned long long max, unsigned long long *out)
{
   char *end = NULL;
   *out = strtoull(arg, &end, 10);
   return arg[0] >= '0' && arg[0] <= '9' && !*end && *out > 0 && *out <= max;
}

int
main(int argc, char **argv)
{
   unsigned long long block_mib = 256, target_mib = 0, threads = 1;
   unsigned long long again_block_mib = 0, share_mib = 0, v;
   bool touch = false, again = false;
   for (int i = 1; i < argc; ++i) {
      if (!strcmp(argv[i], "--block-mib") && i + 1 < argc) {
         if (!parse_count(argv[++i], 4096, &block_mib))
            return usage();
      } else if (!strcmp(argv[i], "--target-gib") && i + 1 < argc) {
         if (target_mib || !parse_count(argv[++i], 4096, &v))
            return usage();
         target_mib = v << 10;
      } else if (!strcmp(argv[i], "--target-mib") && i + 1 < argc) {
         if (target_mib || !parse_count(argv[++i], 4096ull << 10, &target_mib))
            return usage();
      } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
         if (!parse_count(argv[++i], MAX_THREADS, &threads))
            return usage();
      } else if (!strcmp(argv[i], "--again")) {
         again = true;
      } else if (!strcmp(argv[i], "--again-block-mib") && i + 1 < argc) {
         if (!parse_count(argv[++i], 4096, &again_block_mib))
            return usage();
         again = true;
      } else if (!strcmp(argv[i], "--touch")) {
         touch = true;
      } else if (!strcmp(argv[i], "--share") && i + 1 < argc) {
         if (!parse_count(argv[++i], 4096, &share_mib))
            return usage();
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
   if (share_mib) {
      if (argc != 3)
         return usage();
      printf("device: %s, driver %s (%s)\n", props.deviceName,
             drv.driverName, drv.driverInfo);
      int ret = share_block(pd, share_mib << 20);
      mf_instance_destroy(&mi);
      return ret;
   }
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
   printf("heap: %.2f GiB; blocks of %llu MiB%s%s", heap->size / (double)(1ull << 30),
          block_mib, touch ? ", first and last page written" : ", not touched",
          target_mib ? "" : ", until an allocation fails");
   if (threads > 1)
      printf("; %llu threads in lockstep", threads);
   printf("\n");

   print_limits(pd);
   const bool budget = has_memory_budget(pd);
   const uint32_t heap_index = d.mp.memoryTypes[type].heapIndex;
   print_memory(pd, budget, heap_index, 0);

   struct round r = {
      .d = &d,
      .type = type,
      .block = block_mib << 20,
      .target = target_mib << 20,
      .touch = touch,
      .threads = threads,
      .mems = calloc(MAX_BLOCKS, sizeof(VkDeviceMemory)),
      .bufs = calloc(MAX_BLOCKS, sizeof(VkBuffer)),
   };
   if (!r.mems || !r.bufs) {
      fprintf(stderr, "mesa-fork-va-probe: out of host memory\n");
      return 1;
   }
   pthread_mutex_init(&r.lock, NULL);

   run_round(&r, pd, budget, heap_index, true);
   const unsigned n = blocks_held(&r);
   const VkResult stop = r.stop;
   printf("held: %.2f GiB in %u blocks; stopped by %s: %s\n",
          n * (double)r.block / (1ull << 30), n, r.what, mf_result_str(stop));
   printf("rss: %ld MiB\n", rss_mib());
   print_memory(pd, budget, heap_index, n * r.block);
   free_round(&r);
   print_memory_as("freed", pd, budget, heap_index, 0);

   if (again) {
      if (again_block_mib)
         r.block = again_block_mib << 20;
      r.threads = 1;
      run_round(&r, pd, budget, heap_index, false);
      const unsigned again_n = blocks_held(&r);
      printf("again: %.2f GiB in %u blocks of %llu MiB; stopped by %s: %s\n",
             again_n * (double)r.block / (1ull << 30), again_n,
             (unsigned long long)(r.block >> 20), r.what,
             mf_result_str(r.stop));
      free_round(&r);
   }

   pthread_mutex_destroy(&r.lock);
   free(r.bufs);
   free(r.mems);
   mf_device_destroy(&d);
   mf_instance_destroy(&mi);

   bool oom = stop == VK_ERROR_OUT_OF_DEVICE_MEMORY ||
              stop == VK_ERROR_OUT_OF_HOST_MEMORY;
   if (stop != VK_SUCCESS && !oom)
      return 1;
   if (target_mib)
      return n * (block_mib << 20) >= (target_mib << 20) ? 0 : 2;
   return oom ? 0 : 2;
}
