/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-barrier-probe: for users with an Apple GPU under Asahi Linux.
 * Checks the hardware assumption Honeykrisp's lazy barriers
 * (HK_LAZY_BARRIER) and merged streams (HK_MERGE_STREAMS) rest on: one
 * CDM barrier in a control stream waits for, and flushes the writes of,
 * every launch before it in the stream, not only the last one.
 *
 *   mesa-fork-barrier-probe [--rounds R] [--launches K] [--spin S]
 *                           [--record-only]
 *
 * Each round records K dispatches with nothing between them, each writing
 * the round's value into its own slice of a buffer after S rounds of
 * arithmetic (so that the early ones are still running when the later
 * ones start), then one pipeline barrier, then a dispatch that counts the
 * elements not holding the value. With the fork's defaults all rounds are
 * one control stream: the K launches are followed by a single CDM barrier,
 * which must order all of them before the check. Stale data means it does
 * not.
 *
 * Exit status: 0 no stale data (the assumption held), 1 stale data (it does
 * not: run with HK_LAZY_BARRIER=0 and report it), 3 cannot decide (the
 * device executed nothing: a drm-shim, or a broken device), 64 bad
 * arguments. It runs with the knobs of the environment and prints them.
 * --record-only skips the check that the device executes anything and ends
 * with "cannot decide": for looking at the recorded work on a drm-shim.
 */

#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_vk.h"

#include "barrier_check_spv.h"
#include "barrier_write_spv.h"

#define N 4096 /* invocations per launch */
#define HEADER 4 /* bad, pad[3] */

struct push {
   uint32_t base, count, value, spin;
};

static void
run(const struct mf_compute *c, VkCommandBuffer cmd, struct push p)
{
   mf_compute_bind(cmd, c, &p, sizeof(p));
   vkCmdDispatch(cmd, (p.count + 63) / 64, 1, 1);
}

int
main(int argc, char **argv)
{
   unsigned rounds = 50, launches = 8, spin = 2000;
   bool record_only = false;
   for (int i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--record-only")) {
         record_only = true;
         continue;
      }
      unsigned *v = !strcmp(argv[i], "--rounds")     ? &rounds
                    : !strcmp(argv[i], "--launches") ? &launches
                    : !strcmp(argv[i], "--spin")     ? &spin
                                                     : NULL;
      char *end = NULL;
      if (!v || i + 1 >= argc ||
          (*v = strtoul(argv[++i], &end, 10), !end || *end)) {
         fprintf(stderr, "usage: mesa-fork-barrier-probe [--rounds R] "
                         "[--launches K] [--spin S] [--record-only]\n");
         return 64;
      }
   }
   if (rounds == 0 || launches == 0 || launches > 256 || rounds > 100000) {
      fprintf(stderr, "mesa-fork-barrier-probe: R must be 1..100000 and K "
                      "1..256\n");
      return 64;
   }

   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-barrier-probe", false));
   VkPhysicalDevice pd = mf_first_physical_device(&mi, "mesa-fork-barrier-probe");
   VkPhysicalDeviceProperties props;
   VkPhysicalDeviceDriverProperties drv;
   mf_get_driver_properties(pd, &props, &drv);
   printf("device: %s, driver %s (%s)\n", props.deviceName, drv.driverName,
          drv.driverInfo);
   const char *knobs[] = {"HK_LAZY_BARRIER", "HK_MERGE_STREAMS",
                          "HK_CDM_BARRIER_MASK", "HK_PERFTEST"};
   printf("knobs:");
   for (unsigned i = 0; i < 4; i++) {
      const char *v = getenv(knobs[i]);
      printf(" %s=%s", knobs[i], v ? v : "(default)");
   }
   printf("\n%u rounds of %u launches of %u invocations, one barrier "
          "after each round's launches\n",
          rounds, launches, N);

   struct mf_device d;
   mf_device_create(&d, pd, NULL);
   VkDeviceSize size = (HEADER + (VkDeviceSize)launches * N) * 4;
   struct mf_buffer buf;
   mf_buffer_create(&d, size, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1,
                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                    &buf);
   uint32_t *map;
   MF_CHECK(vkMapMemory(d.dev, buf.mem, 0, size, 0, (void **)&map));
   memset(map, 0, size);

   struct mf_compute write = {0}, check;
   mf_compute_create(&d, barrier_write_spv, sizeof(barrier_write_spv),
                     sizeof(struct push), buf.buf, NULL, 0, &write);
   check = write;
   check.pipe = mf_compute_pipeline(&d, &write, barrier_check_spv,
                                    sizeof(barrier_check_spv), NULL, 0);

   /* Does the device execute anything at all? A drm-shim does not. */
   VkCommandBuffer cmd =
      mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY,
               VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
   run(&write, cmd, (struct push){0, 64, 0x5eed, 1});
   mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
              VK_ACCESS_HOST_READ_BIT);
   mf_submit_wait(&d, cmd);
   if (!record_only &&
       (map[HEADER] != 0x5eed || map[HEADER + 63] != 0x5eed)) {
      printf("verdict: cannot decide: the device executed nothing (a "
             "drm-shim runs no shader); run this on Apple hardware\n");
      return 3;
   }

   /* The rounds, in one command buffer: with the fork's defaults, one
    * control stream.
    */
   memset(map, 0, size);
   cmd = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                  VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
   for (unsigned r = 0; r < rounds; r++) {
      uint32_t value = r + 1;
      for (unsigned k = 0; k < launches; k++)
         run(&write, cmd, (struct push){k * N, N, value, spin});
      mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      run(&check, cmd, (struct push){0, launches * N, value, 0});
      /* The next round's writes come after this round's check. */
      mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_WRITE_BIT);
   }
   mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
              VK_ACCESS_HOST_READ_BIT);
   mf_submit_wait(&d, cmd);

   uint64_t checked = (uint64_t)rounds * launches * N;
   bool last_ok = map[HEADER] == rounds &&
                  map[HEADER + launches * N - 1] == rounds;
   int status;
   if (record_only) {
      printf("verdict: cannot decide (--record-only)\n");
      status = 3;
   } else if (!last_ok) {
      printf("verdict: cannot decide: the last round's values are not in the "
             "buffer (%u, %u; expected %u)\n",
             map[HEADER], map[HEADER + launches * N - 1], rounds);
      status = 3;
   } else if (map[0]) {
      printf("verdict: STALE DATA: %u of %llu elements read after the "
             "barrier still held an earlier value: one CDM barrier did not "
             "wait for every earlier launch. Run with HK_LAZY_BARRIER=0 and "
             "report this with the device above\n",
             map[0], (unsigned long long)checked);
      status = 1;
   } else {
      printf("verdict: no stale data in %llu elements: one CDM barrier waited "
             "for every earlier launch of the stream\n",
             (unsigned long long)checked);
      status = 0;
   }

   vkUnmapMemory(d.dev, buf.mem);
   vkDestroyPipeline(d.dev, check.pipe, NULL);
   mf_compute_destroy(&d, &write);
   mf_buffer_destroy(&d, &buf);
   mf_device_destroy(&d);
   mf_instance_destroy(&mi);
   return status;
}
