/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-dispatch-probe: for users with an Apple GPU under Asahi Linux.
 * Times a chain of small compute dispatches, side by side in one run, with
 * Honeykrisp's stock barriers (HK_LAZY_BARRIER=0), with lazy barriers but a
 * control stream per pipeline barrier (HK_MERGE_STREAMS=0), with the fork's
 * defaults (lazy barriers, merged streams), and optionally with a barrier
 * mask. The knobs are read when a device is created, so the probe creates
 * one device per configuration.
 *
 *   mesa-fork-dispatch-probe [--dispatches N] [--runs R] [--mask M]
 *
 * Two workloads per configuration: "independent" has no synchronization
 * between the N dispatches (where lazy barriers help), "chained" has a
 * pipeline barrier between each pair (where every mode barriers alike, and
 * only merged streams save the kernel commands).
 * Prints the median wall time per dispatch of R submissions, fence to
 * fence, and each configuration's ratio to stock. On a drm-shim nothing
 * executes: there it is a smoke test only.
 */

#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mf_vk.h"

#include "fill_spv.h"

struct config {
   const char *name;
   const char *lazy;
   const char *merge;
   const char *mask;
};

static double
now_us(void)
{
   struct timespec ts;
   clock_gettime(CLOCK_MONOTONIC, &ts);
   return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int
cmp_double(const void *a, const void *b)
{
   double x = *(const double *)a, y = *(const double *)b;
   return (x > y) - (x < y);
}

/* Median microseconds per dispatch of both workloads on a fresh device. */
static void
measure(VkPhysicalDevice pd, unsigned n, unsigned runs, double out[2])
{
   struct mf_device d;
   mf_device_create(&d, pd, NULL);
   struct mf_buffer buf;
   mf_buffer_create(&d, 4096, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0, &buf);
   struct mf_compute c;
   mf_compute_create(&d, fill_spv, sizeof(fill_spv), 8, buf.buf, NULL, 0, &c);
   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence;
   MF_CHECK(vkCreateFence(d.dev, &fci, NULL, &fence));
   double *t = calloc(runs, sizeof(*t));

   for (unsigned chained = 0; chained < 2; chained++) {
      VkCommandBuffer cmd = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 0);
      uint32_t push[2] = {1, 64};
      mf_compute_bind(cmd, &c, push, sizeof(push));
      for (unsigned i = 0; i < n; i++) {
         if (chained && i) {
            mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_ACCESS_SHADER_WRITE_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_ACCESS_SHADER_READ_BIT);
         }
         vkCmdDispatch(cmd, 1, 1, 1);
      }
      MF_CHECK(vkEndCommandBuffer(cmd));

      VkSubmitInfo si = {
         .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
         .commandBufferCount = 1,
         .pCommandBuffers = &cmd,
      };
      for (unsigned r = 0; r < runs + 1; r++) {
         MF_CHECK(vkResetFences(d.dev, 1, &fence));
         double t0 = now_us();
         MF_CHECK(vkQueueSubmit(d.queue, 1, &si, fence));
         MF_CHECK(vkWaitForFences(d.dev, 1, &fence, VK_TRUE, 60000000000ull));
         /* The first run warms caches and is not counted. */
         if (r)
            t[r - 1] = now_us() - t0;
      }
      qsort(t, runs, sizeof(*t), cmp_double);
      out[chained] = t[runs / 2] / n;
      vkFreeCommandBuffers(d.dev, d.pool, 1, &cmd);
   }

   free(t);
   vkDestroyFence(d.dev, fence, NULL);
   mf_compute_destroy(&d, &c);
   mf_buffer_destroy(&d, &buf);
   mf_device_destroy(&d);
}

int
main(int argc, char **argv)
{
   unsigned n = 256, runs = 9;
   const char *mask = NULL;
   for (int i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--dispatches") && i + 1 < argc)
         n = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
         runs = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--mask") && i + 1 < argc)
         mask = argv[++i];
      else {
         fprintf(stderr, "usage: mesa-fork-dispatch-probe [--dispatches N] "
                         "[--runs R] [--mask M]\n");
         return 64;
      }
   }
   if (n == 0 || runs == 0) {
      fprintf(stderr, "mesa-fork-dispatch-probe: N and R must be > 0\n");
      return 64;
   }

   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-dispatch-probe", false));
   VkPhysicalDevice pd = mf_first_physical_device(&mi, "mesa-fork-dispatch-probe");
   VkPhysicalDeviceProperties props;
   VkPhysicalDeviceDriverProperties drv;
   mf_get_driver_properties(pd, &props, &drv);
   printf("device: %s, driver %s (%s)\n", props.deviceName, drv.driverName,
          drv.driverInfo);
   if (strcmp(mf_driver_kind(drv.driverID), "asahi"))
      printf("note: HK_* knobs only affect Honeykrisp; all rows will match\n");
   printf("%u dispatches per submission, median of %u submissions\n\n", n,
          runs);

   struct config configs[4] = {
      {"stock (HK_LAZY_BARRIER=0)", "0", "0", NULL},
      {"lazy (HK_MERGE_STREAMS=0)", "1", "0", NULL},
      {"lazy + merge (default)", "1", "1", NULL},
      {"default + mask", "1", "1", mask},
   };
   unsigned nconfigs = mask ? 4 : 3;
   double us[4][2];
   for (unsigned i = 0; i < nconfigs; i++) {
      setenv("HK_LAZY_BARRIER", configs[i].lazy, 1);
      setenv("HK_MERGE_STREAMS", configs[i].merge, 1);
      if (configs[i].mask)
         setenv("HK_CDM_BARRIER_MASK", configs[i].mask, 1);
      else
         unsetenv("HK_CDM_BARRIER_MASK");
      measure(pd, n, runs, us[i]);
   }

   printf("%-32s %16s %9s %16s %9s\n", "configuration", "independent",
          "vs stock", "chained", "vs stock");
   for (unsigned i = 0; i < nconfigs; i++) {
      char name[64];
      snprintf(name, sizeof(name), "%s%s%s", configs[i].name,
               configs[i].mask ? " " : "", configs[i].mask ? mask : "");
      printf("%-32s %13.2f us %8.2fx %13.2f us %8.2fx\n", name, us[i][0],
             us[0][0] / us[i][0], us[i][1], us[0][1] / us[i][1]);
   }

   mf_instance_destroy(&mi);
   return 0;
}
