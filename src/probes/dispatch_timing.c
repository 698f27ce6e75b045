/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-dispatch-probe: for users with an Apple GPU under Asahi Linux.
 * Times a chain of small compute dispatches, side by side in one run, with
 * Honeykrisp's stock barriers (HK_LAZY_BARRIER=0), with lazy barriers, and
 * optionally with lazy barriers and a barrier mask. The knobs are read when
 * a device is created, so the probe creates one device per configuration.
 *
 *   mesa-fork-dispatch-probe [--dispatches N] [--runs R] [--mask M]
 *
 * Two workloads per configuration: "independent" has no synchronization
 * between the N dispatches (where lazy barriers help), "chained" has a
 * pipeline barrier between each pair (where both modes barrier alike).
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

/* Median microseconds per dispatch of one workload on a fresh device. */
static void
measure(VkPhysicalDevice pd, unsigned n, unsigned runs, double out[2])
{
   float prio = 1.0f;
   VkDeviceQueueCreateInfo qci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = 0,
      .queueCount = 1,
      .pQueuePriorities = &prio,
   };
   VkDeviceCreateInfo dci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &qci,
   };
   VkDevice dev;
   MF_CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
   VkQueue queue;
   vkGetDeviceQueue(dev, 0, 0, &queue);

   VkPhysicalDeviceMemoryProperties mp;
   vkGetPhysicalDeviceMemoryProperties(pd, &mp);
   VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = 4096,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
   };
   VkBuffer buf;
   MF_CHECK(vkCreateBuffer(dev, &bci, NULL, &buf));
   VkMemoryRequirements req;
   vkGetBufferMemoryRequirements(dev, buf, &req);
   VkMemoryAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = req.size,
      .memoryTypeIndex = mf_find_memory_type(&mp, req.memoryTypeBits, 0),
   };
   VkDeviceMemory mem;
   MF_CHECK(vkAllocateMemory(dev, &ai, NULL, &mem));
   MF_CHECK(vkBindBufferMemory(dev, buf, mem, 0));

   VkShaderModuleCreateInfo smci = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = sizeof(fill_spv),
      .pCode = fill_spv,
   };
   VkShaderModule sm;
   MF_CHECK(vkCreateShaderModule(dev, &smci, NULL, &sm));
   VkDescriptorSetLayoutBinding b = {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                     VK_SHADER_STAGE_COMPUTE_BIT, NULL};
   VkDescriptorSetLayoutCreateInfo dslci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = 1,
      .pBindings = &b,
   };
   VkDescriptorSetLayout dsl;
   MF_CHECK(vkCreateDescriptorSetLayout(dev, &dslci, NULL, &dsl));
   VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 8};
   VkPipelineLayoutCreateInfo plci = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .setLayoutCount = 1,
      .pSetLayouts = &dsl,
      .pushConstantRangeCount = 1,
      .pPushConstantRanges = &pcr,
   };
   VkPipelineLayout pl;
   MF_CHECK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));
   VkComputePipelineCreateInfo cpci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = sm,
                .pName = "main"},
      .layout = pl,
   };
   VkPipeline pipe;
   MF_CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, NULL, &pipe));
   VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
   VkDescriptorPoolCreateInfo dpci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
      .maxSets = 1,
      .poolSizeCount = 1,
      .pPoolSizes = &ps,
   };
   VkDescriptorPool dp;
   MF_CHECK(vkCreateDescriptorPool(dev, &dpci, NULL, &dp));
   VkDescriptorSetAllocateInfo dsai = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
      .descriptorPool = dp,
      .descriptorSetCount = 1,
      .pSetLayouts = &dsl,
   };
   VkDescriptorSet set;
   MF_CHECK(vkAllocateDescriptorSets(dev, &dsai, &set));
   VkDescriptorBufferInfo dbi = {buf, 0, VK_WHOLE_SIZE};
   VkWriteDescriptorSet w = {
      .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
      .dstSet = set,
      .descriptorCount = 1,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .pBufferInfo = &dbi,
   };
   vkUpdateDescriptorSets(dev, 1, &w, 0, NULL);

   VkCommandPoolCreateInfo cpoolci = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
   };
   VkCommandPool pool;
   MF_CHECK(vkCreateCommandPool(dev, &cpoolci, NULL, &pool));
   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence;
   MF_CHECK(vkCreateFence(dev, &fci, NULL, &fence));
   double *t = calloc(runs, sizeof(*t));

   for (unsigned chained = 0; chained < 2; chained++) {
      VkCommandBufferAllocateInfo cbai = {
         .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
         .commandPool = pool,
         .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
         .commandBufferCount = 1,
      };
      VkCommandBuffer cmd;
      MF_CHECK(vkAllocateCommandBuffers(dev, &cbai, &cmd));
      VkCommandBufferBeginInfo bi = {
         .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      };
      MF_CHECK(vkBeginCommandBuffer(cmd, &bi));
      uint32_t push[2] = {1, 64};
      vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
      vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1,
                              &set, 0, NULL);
      vkCmdPushConstants(cmd, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 8, push);
      for (unsigned i = 0; i < n; i++) {
         if (chained && i) {
            VkMemoryBarrier mb = {
               .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
               .dstAccessMask = VK_ACCESS_SHADER_READ_BIT,
            };
            vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                                 &mb, 0, NULL, 0, NULL);
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
         MF_CHECK(vkResetFences(dev, 1, &fence));
         double t0 = now_us();
         MF_CHECK(vkQueueSubmit(queue, 1, &si, fence));
         MF_CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, 60000000000ull));
         /* The first run warms caches and is not counted. */
         if (r)
            t[r - 1] = now_us() - t0;
      }
      qsort(t, runs, sizeof(*t), cmp_double);
      out[chained] = t[runs / 2] / n;
      vkFreeCommandBuffers(dev, pool, 1, &cmd);
   }

   free(t);
   vkDestroyFence(dev, fence, NULL);
   vkDestroyCommandPool(dev, pool, NULL);
   vkDestroyDescriptorPool(dev, dp, NULL);
   vkDestroyPipeline(dev, pipe, NULL);
   vkDestroyPipelineLayout(dev, pl, NULL);
   vkDestroyDescriptorSetLayout(dev, dsl, NULL);
   vkDestroyShaderModule(dev, sm, NULL);
   vkDestroyBuffer(dev, buf, NULL);
   vkFreeMemory(dev, mem, NULL);
   vkDestroyDevice(dev, NULL);
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
   uint32_t count = 1;
   VkPhysicalDevice pd;
   VkResult r = vkEnumeratePhysicalDevices(mi.instance, &count, &pd);
   if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) {
      fprintf(stderr, "mesa-fork-dispatch-probe: no Vulkan device\n");
      return 1;
   }
   VkPhysicalDeviceDriverProperties drv = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
   };
   VkPhysicalDeviceProperties2 props = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
      .pNext = &drv,
   };
   vkGetPhysicalDeviceProperties2(pd, &props);
   printf("device: %s, driver %s (%s)\n", props.properties.deviceName,
          drv.driverName, drv.driverInfo);
   if (strcmp(mf_driver_kind(drv.driverID), "asahi"))
      printf("note: HK_* knobs only affect Honeykrisp; all rows will match\n");
   printf("%u dispatches per submission, median of %u submissions\n\n", n,
          runs);

   struct config configs[3] = {
      {"stock (HK_LAZY_BARRIER=0)", "0", NULL},
      {"lazy (default)", "1", NULL},
      {"lazy + mask", "1", mask},
   };
   unsigned nconfigs = mask ? 3 : 2;
   double us[3][2];
   for (unsigned i = 0; i < nconfigs; i++) {
      setenv("HK_LAZY_BARRIER", configs[i].lazy, 1);
      if (configs[i].mask)
         setenv("HK_CDM_BARRIER_MASK", configs[i].mask, 1);
      else
         unsetenv("HK_CDM_BARRIER_MASK");
      measure(pd, n, runs, us[i]);
   }

   printf("%-28s %16s %9s %16s %9s\n", "configuration", "independent",
          "vs stock", "chained", "vs stock");
   for (unsigned i = 0; i < nconfigs; i++) {
      char name[64];
      snprintf(name, sizeof(name), "%s%s%s", configs[i].name,
               configs[i].mask ? " " : "", configs[i].mask ? mask : "");
      printf("%-28s %13.2f us %8.2fx %13.2f us %8.2fx\n", name, us[i][0],
             us[0][0] / us[i][0], us[i][1], us[0][1] / us[i][1]);
   }

   mf_instance_destroy(&mi);
   return 0;
}
