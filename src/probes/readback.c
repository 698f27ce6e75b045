/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-readback-probe: for users with a GPU. For every host-visible
 * memory type that a transfer buffer may be bound to (its memoryTypeBits;
 * ANV's descriptor-buffer types are not among them), measure upload (the CPU
 * copies into a buffer of that type, with vkFlushMappedMemoryRanges after
 * on a non-coherent type, and the GPU copies it out: both timed, with the
 * submission's latency) and readback: the GPU
 * copies into a buffer of that type, then the CPU copies it out (with
 * vkInvalidateMappedMemoryRanges first on a non-coherent type, as an
 * application must), median of N runs, against a host memcpy of the same
 * size measured in the same run. Where a write-combined (coherent, not
 * cached) and a cached and coherent type are both probed, it prints their
 * upload and readback ratios: applications that ask for cached and
 * coherent memory move from the first to the second. Then check coherency adversarially: the
 * CPU dirties its cache lines of the buffer, the GPU overwrites it, and the
 * CPU compares byte for byte without any invalidate on a coherent type.
 *
 *   mesa-fork-readback-probe [--size MiB] [--runs N] [--device N] [--strict]
 *                            [--validate] [--export]
 *
 * --strict exits with 1 when a coherency check fails. --export measures
 * nothing: for each of those types it allocates, maps, writes and frees an
 * exportable allocation (VkExportMemoryAllocateInfo, opaque fd) of
 * (2 * type + 1) MiB and a plain one of (2 * type + 2) MiB, and prints one
 * line per allocation, so that a drm-shim log shows how each was created
 * and mapped. --validate runs under
 * the Khronos validation layer and exits with 3 when it reports anything.
 * On a drm-shim nothing executes: the numbers mean nothing and the check
 * fails; there it is a smoke test of the probe itself.
 */

#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mf_vk.h"

struct ctx {
   struct mf_device d;
   VkCommandBuffer cmd;
   VkFence fence;
};

static double
now_s(void)
{
   struct timespec ts;
   clock_gettime(CLOCK_MONOTONIC, &ts);
   return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
   double x = *(const double *)a, y = *(const double *)b;
   return (x > y) - (x < y);
}

static double
median(double *v, unsigned n)
{
   qsort(v, n, sizeof(*v), cmp_double);
   return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Records cmd (fill or copy into dst), submits and waits. */
static void
gpu_write(struct ctx *c, VkBuffer src, VkBuffer dst, VkDeviceSize size,
          uint32_t fill)
{
   VkCommandBufferBeginInfo bi = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
   };
   MF_CHECK(vkResetCommandBuffer(c->cmd, 0));
   MF_CHECK(vkBeginCommandBuffer(c->cmd, &bi));
   if (src) {
      VkBufferCopy region = {0, 0, size};
      vkCmdCopyBuffer(c->cmd, src, dst, 1, &region);
   } else {
      vkCmdFillBuffer(c->cmd, dst, 0, size, fill);
   }
   VkMemoryBarrier to_host = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
   };
   vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                        VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL,
                        0, NULL);
   MF_CHECK(vkEndCommandBuffer(c->cmd));
   VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &c->cmd,
   };
   MF_CHECK(vkResetFences(c->d.dev, 1, &c->fence));
   MF_CHECK(vkQueueSubmit(c->d.queue, 1, &si, c->fence));
   MF_CHECK(vkWaitForFences(c->d.dev, 1, &c->fence, VK_TRUE, 60ull * 1000000000));
}

/* The memory types a buffer of this size and usage may be bound to. */
static uint32_t
buffer_type_bits(struct ctx *c, VkDeviceSize size, VkBufferUsageFlags usage)
{
   VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage = usage,
   };
   VkBuffer buf;
   MF_CHECK(vkCreateBuffer(c->d.dev, &bci, NULL, &buf));
   VkMemoryRequirements req;
   vkGetBufferMemoryRequirements(c->d.dev, buf, &req);
   vkDestroyBuffer(c->d.dev, buf, NULL);
   return req.memoryTypeBits;
}

static double
host_memcpy_gbs(VkDeviceSize size, unsigned runs)
{
   char *a = malloc(size), *b = malloc(size);
   double *t = calloc(runs, sizeof(*t));
   memset(a, 1, size);
   memset(b, 2, size);
   for (unsigned i = 0; i < runs; i++) {
      double t0 = now_s();
      memcpy(b, a, size);
      t[i] = now_s() - t0;
   }
   volatile char sink = b[size / 2];
   (void)sink;
   double gbs = size / median(t, runs) / 1e9;
   free(a);
   free(b);
   free(t);
   return gbs;
}

/* One allocation of `type`, exportable or not, mapped and written. */
static void
allocate_mapped(struct ctx *c, uint32_t type, VkDeviceSize size, bool exported)
{
   VkExportMemoryAllocateInfo export_info = {
      .sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
      .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
   };
   VkMemoryAllocateInfo mai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .pNext = exported ? &export_info : NULL,
      .allocationSize = size,
      .memoryTypeIndex = type,
   };
   VkDeviceMemory mem;
   MF_CHECK(vkAllocateMemory(c->d.dev, &mai, NULL, &mem));
   uint32_t *map;
   MF_CHECK(vkMapMemory(c->d.dev, mem, 0, VK_WHOLE_SIZE, 0, (void **)&map));
   map[0] = 0x01020304;
   vkUnmapMemory(c->d.dev, mem);
   vkFreeMemory(c->d.dev, mem, NULL);

   char flags[128];
   mf_memory_flags_str(c->d.mp.memoryTypes[type].propertyFlags, flags,
                       sizeof(flags));
   printf("{\"type\": %u, \"flags\": \"%s\", \"exported\": %s, "
          "\"size\": %llu}\n",
          type, flags, exported ? "true" : "false", (unsigned long long)size);
}

/* Returns false when the coherency check fails; upload and readback GB/s
 * in *up and *down. */
static bool
probe_type(struct ctx *c, uint32_t type, VkDeviceSize size, unsigned runs,
           double host_gbs, double *up, double *down)
{
   VkMemoryPropertyFlags f = c->d.mp.memoryTypes[type].propertyFlags;
   bool coherent = f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
   char flags[128];
   mf_memory_flags_str(f, flags, sizeof(flags));

   struct mf_buffer src, dst;
   mf_buffer_create(&c->d, size,
                    VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                    -1, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &src);
   mf_buffer_create(&c->d, size,
                    VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                    type, 0, &dst);
   uint32_t *map;
   MF_CHECK(vkMapMemory(c->d.dev, dst.mem, 0, VK_WHOLE_SIZE, 0, (void **)&map));
   char *host = malloc(size);
   double *t = calloc(runs, sizeof(*t));
   VkMappedMemoryRange range = {
      .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
      .memory = dst.mem,
      .size = VK_WHOLE_SIZE,
   };

   memset(host, 7, size);
   for (unsigned i = 0; i < runs; i++) {
      double t0 = now_s();
      memcpy(map, host, size);
      if (!coherent)
         MF_CHECK(vkFlushMappedMemoryRanges(c->d.dev, 1, &range));
      /* The GPU's read is where snooping a write-back type costs. */
      gpu_write(c, dst.buf, src.buf, size, 0);
      t[i] = now_s() - t0;
   }
   double up_gbs = size / median(t, runs) / 1e9;

   gpu_write(c, VK_NULL_HANDLE, src.buf, size, 0x01020304);
   for (unsigned i = 0; i < runs; i++) {
      gpu_write(c, src.buf, dst.buf, size, 0);
      double t0 = now_s();
      if (!coherent)
         MF_CHECK(vkInvalidateMappedMemoryRanges(c->d.dev, 1, &range));
      memcpy(host, map, size);
      t[i] = now_s() - t0;
   }
   double gbs = size / median(t, runs) / 1e9;

   /* Adversarial coherency: make the CPU hold dirty and then clean copies of
    * every line with pattern A, let the GPU write pattern B, read without an
    * invalidate where the type promises coherency.
    */
   const uint32_t a = 0xaaaaaaaa, b = 0x5b5b5b5b;
   uint32_t words = size / 4;
   for (uint32_t i = 0; i < words; i++)
      map[i] = a;
   if (!coherent)
      MF_CHECK(vkFlushMappedMemoryRanges(c->d.dev, 1, &range));
   volatile uint32_t sum = 0;
   for (uint32_t i = 0; i < words; i += 16)
      sum += map[i];
   gpu_write(c, VK_NULL_HANDLE, dst.buf, size, b);
   if (!coherent)
      MF_CHECK(vkInvalidateMappedMemoryRanges(c->d.dev, 1, &range));
   uint64_t stale = 0;
   for (uint32_t i = 0; i < words; i++)
      stale += map[i] != b;

   printf("type %2u %-50s upload %7.2f GB/s  readback %7.2f GB/s  "
          "host memcpy %7.2f GB/s  host/readback %6.1fx  coherency %s "
          "(%llu of %u words stale)\n",
          type, flags, up_gbs, gbs, host_gbs, host_gbs / gbs,
          stale ? "FAIL" : "ok", (unsigned long long)stale, words);
   *up = up_gbs;
   *down = gbs;

   free(host);
   free(t);
   vkUnmapMemory(c->d.dev, dst.mem);
   mf_buffer_destroy(&c->d, &src);
   mf_buffer_destroy(&c->d, &dst);
   return stale == 0;
}

int
main(int argc, char **argv)
{
   unsigned size_mib = 32, runs = 9;
   int device = 0;
   bool strict = false, validate = false, export = false;
   for (int i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--size") && i + 1 < argc)
         size_mib = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
         runs = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--device") && i + 1 < argc)
         device = strtol(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--strict"))
         strict = true;
      else if (!strcmp(argv[i], "--validate"))
         validate = true;
      else if (!strcmp(argv[i], "--export"))
         export = true;
      else {
         fprintf(stderr, "usage: mesa-fork-readback-probe [--size MiB] "
                         "[--runs N] [--device N] [--strict] [--validate] "
                         "[--export]\n");
         return 64;
      }
   }
   if (size_mib == 0 || runs == 0) {
      fprintf(stderr, "mesa-fork-readback-probe: --size and --runs must be > 0\n");
      return 64;
   }

   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-readback-probe", validate));
   uint32_t n = 0;
   MF_CHECK(vkEnumeratePhysicalDevices(mi.instance, &n, NULL));
   VkPhysicalDevice pds[16];
   n = n > 16 ? 16 : n;
   MF_CHECK(vkEnumeratePhysicalDevices(mi.instance, &n, pds));
   if (device < 0 || (unsigned)device >= n) {
      fprintf(stderr, "mesa-fork-readback-probe: no device %d (%u found)\n",
              device, n);
      return 1;
   }

   struct ctx c;
   VkPhysicalDeviceProperties props;
   vkGetPhysicalDeviceProperties(pds[device], &props);
   printf("device: %s, %u MiB, median of %u runs\n", props.deviceName,
          size_mib, runs);
   mf_device_create(&c.d, pds[device], NULL);
   VkCommandBufferAllocateInfo cai = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = c.d.pool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = 1,
   };
   MF_CHECK(vkAllocateCommandBuffers(c.d.dev, &cai, &c.cmd));
   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   MF_CHECK(vkCreateFence(c.d.dev, &fci, NULL, &c.fence));

   VkDeviceSize size = (VkDeviceSize)size_mib << 20;
   double host_gbs = host_memcpy_gbs(size, runs);
   /* The upload source's and readback target's usage; the device-local
    * buffer on the other side may use any type. */
   uint32_t allowed = buffer_type_bits(
      &c, size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT);
   unsigned probed = 0, skipped = 0, incoherent = 0;
   /* GB/s up and down of the first write-combined and cached+coherent
    * types probed; 0 when there is none. */
   double wc[2] = {0, 0}, cc[2] = {0, 0};
   for (uint32_t i = 0; i < c.d.mp.memoryTypeCount; i++) {
      VkMemoryPropertyFlags f = c.d.mp.memoryTypes[i].propertyFlags;
      if (!(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
         continue;
      if (!(allowed & (1u << i))) {
         char flags[128];
         mf_memory_flags_str(f, flags, sizeof(flags));
         printf("type %2u %-50s skipped: not in a transfer buffer's "
                "memoryTypeBits (0x%x)\n", i, flags, allowed);
         skipped++;
         continue;
      }
      if (export) {
         allocate_mapped(&c, i, (2ull * i + 1) << 20, true);
         allocate_mapped(&c, i, (2ull * i + 2) << 20, false);
      } else {
         double up, down;
         incoherent += !probe_type(&c, i, size, runs, host_gbs, &up, &down);
         const VkMemoryPropertyFlags coh_cached =
            VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
            VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
         double *which = (f & coh_cached) == coh_cached ? cc
                         : (f & coh_cached) == VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                            ? wc
                            : NULL;
         if (which && !which[0]) {
            which[0] = up;
            which[1] = down;
         }
      }
      probed++;
   }
   printf("summary: %u host-visible type(s) probed, %u skipped, %u failed "
          "the coherency check\n", probed, skipped, incoherent);
   if (wc[0] && cc[0]) {
      printf("cached+coherent / write-combined: upload %.2fx, readback "
             "%.2fx\n", cc[0] / wc[0], cc[1] / wc[1]);
   }

   vkDestroyFence(c.d.dev, c.fence, NULL);
   mf_device_destroy(&c.d);
   unsigned messages = mi.messages;
   mf_instance_destroy(&mi);
   if (validate) {
      printf("validation: %u message(s)\n", messages);
      if (messages)
         return 3;
   }
   return strict && incoherent ? 1 : 0;
}
