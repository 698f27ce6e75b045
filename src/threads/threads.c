/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-threads: T threads on one device, each with its own command
 * pool, record, submit, wait on, reset and free command buffers for R
 * rounds, with thread-local (TLS) and workgroup (WLS) scratch needs that
 * differ between threads and grow between rounds: what an application
 * recording from several threads asks of a driver's scratch memory.
 *
 *   mesa-fork-threads [--validate] [--threads T] [--rounds R] [--tls-kib K]
 *                     [--same] [--end-together] [--no-wls]
 *
 * In round r, thread t records a dispatch of a shader needing
 * ((t + r) % 3 + 1) * K KiB of TLS per thread (with --same, (r % 3 + 1) * K
 * in every thread), a compute barrier, and a dispatch using 32 KiB of WLS
 * (not with --no-wls). It submits the command buffer (the queue is shared:
 * submissions take a mutex), waits on its fence, and then resets the
 * command buffer, or every second round frees it and allocates another.
 * --end-together makes the threads wait for each other before each
 * vkEndCommandBuffer, so that they grow the driver's scratch at the same
 * moment.
 *
 * Prints one JSON summary line, with how long each thread's first
 * vkEndCommandBuffer took ("first_end_ms"): a thread that waited for
 * another's growth of the scratch took as long as that growth.
 */

#define _POSIX_C_SOURCE 200809L /* pthread barriers in strict C11 */

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mf_vk.h"

#include "shared_spv.h"
#include "spill_spv.h"

#define TLS_PIPES 3
#define MAX_THREADS 16

struct shared {
   struct mf_device d;
   struct mf_compute tls[TLS_PIPES], wls;
   unsigned rounds;
   bool same, wls_on;
   bool end_together;
   pthread_barrier_t end_barrier;
   pthread_mutex_t queue_lock;
};

struct worker {
   struct shared *s;
   unsigned t;
   unsigned ok, oom, other;
   double first_end_ms;
   pthread_t thread;
};

static double
now_ms(void)
{
   struct timespec ts;
   clock_gettime(CLOCK_MONOTONIC, &ts);
   return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static VkCommandBuffer
allocate(struct shared *s, VkCommandPool pool)
{
   VkCommandBufferAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = pool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = 1,
   };
   VkCommandBuffer cmd;
   MF_CHECK(vkAllocateCommandBuffers(s->d.dev, &ai, &cmd));
   return cmd;
}

static void *
work(void *arg)
{
   struct worker *w = arg;
   struct shared *s = w->s;
   VkCommandPoolCreateInfo pci = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
      .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
      .queueFamilyIndex = s->d.family,
   };
   VkCommandPool pool;
   MF_CHECK(vkCreateCommandPool(s->d.dev, &pci, NULL, &pool));
   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence;
   MF_CHECK(vkCreateFence(s->d.dev, &fci, NULL, &fence));
   VkCommandBuffer cmd = allocate(s, pool);
   uint32_t words = 1 << 18;

   for (unsigned r = 0; r < s->rounds; r++) {
      VkCommandBufferBeginInfo bi = {
         .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
         .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
      };
      MF_CHECK(vkBeginCommandBuffer(cmd, &bi));
      unsigned p = ((s->same ? 0 : w->t) + r) % TLS_PIPES;
      mf_compute_bind(cmd, &s->tls[p], &words, sizeof(words));
      vkCmdDispatch(cmd, 64, 1, 1);
      if (s->wls_on) {
         mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    VK_ACCESS_SHADER_WRITE_BIT,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
         mf_compute_bind(cmd, &s->wls, &words, sizeof(words));
         vkCmdDispatch(cmd, 64 << p, 1, 1);
      }
      if (s->end_together)
         pthread_barrier_wait(&s->end_barrier);
      double t0 = now_ms();
      VkResult res = vkEndCommandBuffer(cmd);
      if (r == 0)
         w->first_end_ms = now_ms() - t0;
      w->ok += res == VK_SUCCESS;
      w->oom += res == VK_ERROR_OUT_OF_DEVICE_MEMORY;
      w->other += res != VK_SUCCESS && res != VK_ERROR_OUT_OF_DEVICE_MEMORY;
      if (res == VK_SUCCESS) {
         VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 1,
            .pCommandBuffers = &cmd,
         };
         pthread_mutex_lock(&s->queue_lock);
         MF_CHECK(vkQueueSubmit(s->d.queue, 1, &si, fence));
         pthread_mutex_unlock(&s->queue_lock);
         MF_CHECK(vkWaitForFences(s->d.dev, 1, &fence, VK_TRUE,
                                  60000000000ull));
         MF_CHECK(vkResetFences(s->d.dev, 1, &fence));
      }
      if (r % 2) {
         vkFreeCommandBuffers(s->d.dev, pool, 1, &cmd);
         cmd = allocate(s, pool);
      } else {
         MF_CHECK(vkResetCommandBuffer(cmd, 0));
      }
   }

   vkFreeCommandBuffers(s->d.dev, pool, 1, &cmd);
   vkDestroyFence(s->d.dev, fence, NULL);
   vkDestroyCommandPool(s->d.dev, pool, NULL);
   return NULL;
}

int
main(int argc, char **argv)
{
   unsigned threads = 4, rounds = 6, tls_kib = 4;
   bool validate = false, same = false, end_together = false, wls_on = true;
   bool usage = false;
   for (int i = 1; i < argc; i++) {
      if (!strcmp(argv[i], "--validate"))
         validate = true;
      else if (!strcmp(argv[i], "--same"))
         same = true;
      else if (!strcmp(argv[i], "--end-together"))
         end_together = true;
      else if (!strcmp(argv[i], "--no-wls"))
         wls_on = false;
      else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
         threads = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
         rounds = strtoul(argv[++i], NULL, 10);
      else if (!strcmp(argv[i], "--tls-kib") && i + 1 < argc)
         tls_kib = strtoul(argv[++i], NULL, 10);
      else
         usage = true;
   }
   if (usage || threads == 0 || threads > MAX_THREADS || rounds == 0 ||
       rounds > 1000 || tls_kib == 0 || tls_kib > 16) {
      fprintf(stderr, "usage: mesa-fork-threads [--validate] [--threads T<=%d] "
                      "[--rounds R] [--tls-kib K<=16] [--same] "
                      "[--end-together] [--no-wls]\n", MAX_THREADS);
      return 64;
   }

   struct mf_instance mi;
   MF_CHECK(mf_instance_create(&mi, "mesa-fork-threads", validate));
   struct shared s = {.rounds = rounds, .same = same, .wls_on = wls_on,
                      .end_together = end_together};
   mf_device_create(&s.d, mf_first_physical_device(&mi, "mesa-fork-threads"),
                    NULL);
   struct mf_buffer buf;
   mf_buffer_create(&s.d, 1 << 20, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1, 0,
                    &buf);
   for (unsigned p = 0; p < TLS_PIPES; p++) {
      uint32_t priv_words = tls_kib * 256 * (p + 1);
      VkSpecializationMapEntry entry = {0, 0, sizeof(priv_words)};
      VkSpecializationInfo spec = {1, &entry, sizeof(priv_words), &priv_words};
      mf_compute_create(&s.d, spill_spv, sizeof(spill_spv), 4, buf.buf, &spec,
                        0, &s.tls[p]);
   }
   uint32_t wls_consts[2] = {256, 32 * 256};
   VkSpecializationMapEntry wls_entries[2] = {
      {1, 0, sizeof(uint32_t)},
      {2, sizeof(uint32_t), sizeof(uint32_t)},
   };
   VkSpecializationInfo wls_spec = {2, wls_entries, sizeof(wls_consts),
                                    wls_consts};
   mf_compute_create(&s.d, shared_spv, sizeof(shared_spv), 4, buf.buf,
                     &wls_spec, 0, &s.wls);
   pthread_mutex_init(&s.queue_lock, NULL);
   pthread_barrier_init(&s.end_barrier, NULL, threads);

   struct worker w[MAX_THREADS] = {0};
   for (unsigned t = 0; t < threads; t++) {
      w[t] = (struct worker){.s = &s, .t = t};
      if (pthread_create(&w[t].thread, NULL, work, &w[t])) {
         fprintf(stderr, "mesa-fork-threads: cannot start thread %u\n", t);
         return 1;
      }
   }
   unsigned ok = 0, oom = 0, other = 0;
   for (unsigned t = 0; t < threads; t++) {
      pthread_join(w[t].thread, NULL);
      ok += w[t].ok;
      oom += w[t].oom;
      other += w[t].other;
   }

   pthread_barrier_destroy(&s.end_barrier);
   pthread_mutex_destroy(&s.queue_lock);
   for (unsigned p = 0; p < TLS_PIPES; p++)
      mf_compute_destroy(&s.d, &s.tls[p]);
   mf_compute_destroy(&s.d, &s.wls);
   mf_buffer_destroy(&s.d, &buf);
   mf_device_destroy(&s.d);
   unsigned messages = mi.messages;
   mf_instance_destroy(&mi);
   printf("{\"summary\": true, \"threads\": %u, \"rounds\": %u, \"ok\": %u, "
          "\"out_of_device_memory\": %u, \"other\": %u, "
          "\"validation_messages\": %u, \"first_end_ms\": [",
          threads, rounds, ok, oom, other, messages);
   for (unsigned t = 0; t < threads; t++)
      printf("%s%.1f", t ? ", " : "", w[t].first_end_ms);
   printf("]}\n");
   return messages ? 3 : other ? 1 : 0;
}
