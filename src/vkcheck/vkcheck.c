/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-vkcheck: the smallest end-to-end compute submission, on every
 * Vulkan device or one of them. It creates an instance and a device,
 * allocates and maps memory, records a compute dispatch, a pipeline barrier
 * and a buffer copy, submits, waits on a fence, and reports each step.
 *
 *   mesa-fork-vkcheck [--validate] [--verify] [--device N]
 *   mesa-fork-vkcheck --list        one JSON line per device
 *
 * --validate enables VK_LAYER_KHRONOS_validation and fails on any message.
 * --verify fails when the copied data is wrong (use it on real hardware; a
 * drm-shim executes nothing, so there the data is only reported).
 */

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_vk.h"

#include "fill_spv.h"

#define COUNT 4096u
#define MUL   3u

struct opts {
   bool list, validate, verify;
   int device;
};

static void
usage(void)
{
   fprintf(stderr, "usage: mesa-fork-vkcheck [--list] [--validate] "
                   "[--verify] [--device N]\n");
   exit(64);
}

static struct opts
parse(int argc, char **argv)
{
   struct opts o = {.device = -1};
   for (int i = 1; i < argc; ++i) {
      if (!strcmp(argv[i], "--list"))
         o.list = true;
      else if (!strcmp(argv[i], "--validate"))
         o.validate = true;
      else if (!strcmp(argv[i], "--verify"))
         o.verify = true;
      else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
         char *end;
         o.device = strtol(argv[++i], &end, 10);
         if (*end || o.device < 0)
            usage();
      } else
         usage();
   }
   return o;
}

static void
json_str(const char *s)
{
   putchar('"');
   for (; *s; ++s) {
      if (*s == '"' || *s == '\\')
         putchar('\\');
      if ((unsigned char)*s >= 0x20)
         putchar(*s);
   }
   putchar('"');
}

static void
list_device(VkPhysicalDevice pd)
{
   VkPhysicalDeviceDriverProperties drv = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
   };
   VkPhysicalDeviceProperties2 p = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
      .pNext = &drv,
   };
   vkGetPhysicalDeviceProperties2(pd, &p);
   printf("{\"name\": ");
   json_str(p.properties.deviceName);
   printf(", \"driver\": ");
   json_str(drv.driverName);
   printf(", \"driver_kind\": \"%s\", \"info\": ", mf_driver_kind(drv.driverID));
   json_str(drv.driverInfo);
   printf(", \"api\": \"%u.%u.%u\", \"device_type\": %d}\n",
          VK_API_VERSION_MAJOR(p.properties.apiVersion),
          VK_API_VERSION_MINOR(p.properties.apiVersion),
          VK_API_VERSION_PATCH(p.properties.apiVersion),
          p.properties.deviceType);
}

struct buffer {
   VkBuffer buf;
   VkDeviceMemory mem;
   uint32_t *map;
};

static void
make_buffer(VkDevice dev, const VkPhysicalDeviceMemoryProperties *mp,
            VkBufferUsageFlags usage, struct buffer *b)
{
   VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = COUNT * sizeof(uint32_t),
      .usage = usage,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
   };
   MF_CHECK(vkCreateBuffer(dev, &bci, NULL, &b->buf));
   VkMemoryRequirements req;
   vkGetBufferMemoryRequirements(dev, b->buf, &req);
   int type = mf_find_memory_type(mp, req.memoryTypeBits,
                                  VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
   if (type < 0) {
      fprintf(stderr, "no host-visible coherent memory type\n");
      exit(2);
   }
   VkMemoryAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = req.size,
      .memoryTypeIndex = type,
   };
   MF_CHECK(vkAllocateMemory(dev, &ai, NULL, &b->mem));
   MF_CHECK(vkBindBufferMemory(dev, b->buf, b->mem, 0));
   MF_CHECK(vkMapMemory(dev, b->mem, 0, VK_WHOLE_SIZE, 0, (void **)&b->map));
}

static void
free_buffer(VkDevice dev, struct buffer *b)
{
   vkUnmapMemory(dev, b->mem);
   vkDestroyBuffer(dev, b->buf, NULL);
   vkFreeMemory(dev, b->mem, NULL);
}

/* Returns the number of wrong elements (only meaningful on hardware). */
static unsigned
run_device(VkPhysicalDevice pd, unsigned index)
{
   VkPhysicalDeviceProperties props;
   vkGetPhysicalDeviceProperties(pd, &props);
   printf("device %u: %s\n", index, props.deviceName);

   uint32_t nq = 0;
   vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
   VkQueueFamilyProperties qf[16];
   nq = nq > 16 ? 16 : nq;
   vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
   uint32_t family = UINT32_MAX;
   for (uint32_t i = 0; i < nq && family == UINT32_MAX; ++i) {
      if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
         family = i;
   }
   if (family == UINT32_MAX) {
      fprintf(stderr, "no compute queue\n");
      exit(2);
   }

   float prio = 1.0f;
   VkDeviceQueueCreateInfo qci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = family,
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
   vkGetDeviceQueue(dev, family, 0, &queue);
   printf("  created device, compute queue family %u\n", family);

   VkPhysicalDeviceMemoryProperties mp;
   vkGetPhysicalDeviceMemoryProperties(pd, &mp);
   struct buffer out, copy;
   make_buffer(dev, &mp,
               VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                  VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
               &out);
   make_buffer(dev, &mp, VK_BUFFER_USAGE_TRANSFER_DST_BIT, &copy);
   memset(out.map, 0xff, COUNT * sizeof(uint32_t));
   memset(copy.map, 0xee, COUNT * sizeof(uint32_t));
   printf("  allocated and mapped 2 x %zu bytes of host-visible memory\n",
          COUNT * sizeof(uint32_t));

   VkShaderModuleCreateInfo smci = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = sizeof(fill_spv),
      .pCode = fill_spv,
   };
   VkShaderModule sm;
   MF_CHECK(vkCreateShaderModule(dev, &smci, NULL, &sm));

   VkDescriptorSetLayoutBinding binding = {
      .binding = 0,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .descriptorCount = 1,
      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
   };
   VkDescriptorSetLayoutCreateInfo dslci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = 1,
      .pBindings = &binding,
   };
   VkDescriptorSetLayout dsl;
   MF_CHECK(vkCreateDescriptorSetLayout(dev, &dslci, NULL, &dsl));
   VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0,
                              2 * sizeof(uint32_t)};
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
      .stage =
         {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = sm,
            .pName = "main",
         },
      .layout = pl,
   };
   VkPipeline pipe;
   MF_CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, NULL,
                                     &pipe));
   printf("  compiled compute pipeline (%zu bytes of SPIR-V)\n",
          sizeof(fill_spv));

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
   VkDescriptorSet ds;
   MF_CHECK(vkAllocateDescriptorSets(dev, &dsai, &ds));
   VkDescriptorBufferInfo dbi = {out.buf, 0, VK_WHOLE_SIZE};
   VkWriteDescriptorSet wds = {
      .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
      .dstSet = ds,
      .descriptorCount = 1,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .pBufferInfo = &dbi,
   };
   vkUpdateDescriptorSets(dev, 1, &wds, 0, NULL);

   VkCommandPoolCreateInfo cpoolci = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
      .queueFamilyIndex = family,
   };
   VkCommandPool cpool;
   MF_CHECK(vkCreateCommandPool(dev, &cpoolci, NULL, &cpool));
   VkCommandBufferAllocateInfo cbai = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = cpool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = 1,
   };
   VkCommandBuffer cmd;
   MF_CHECK(vkAllocateCommandBuffers(dev, &cbai, &cmd));

   VkCommandBufferBeginInfo bi = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
   };
   MF_CHECK(vkBeginCommandBuffer(cmd, &bi));
   vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
   vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds,
                           0, NULL);
   uint32_t push[2] = {MUL, COUNT};
   vkCmdPushConstants(cmd, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push),
                      push);
   vkCmdDispatch(cmd, COUNT / 64, 1, 1);
   VkMemoryBarrier to_copy = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
   };
   vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                        VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &to_copy, 0,
                        NULL, 0, NULL);
   VkBufferCopy region = {0, 0, COUNT * sizeof(uint32_t)};
   vkCmdCopyBuffer(cmd, out.buf, copy.buf, 1, &region);
   VkMemoryBarrier to_host = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
   };
   vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                        VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL,
                        0, NULL);
   MF_CHECK(vkEndCommandBuffer(cmd));
   printf("  recorded dispatch %ux1x1, pipeline barrier, copy of %zu bytes\n",
          COUNT / 64, COUNT * sizeof(uint32_t));

   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence;
   MF_CHECK(vkCreateFence(dev, &fci, NULL, &fence));
   VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &cmd,
   };
   MF_CHECK(vkQueueSubmit(queue, 1, &si, fence));
   MF_CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, 10ull * 1000 * 1000 * 1000));
   printf("  submitted and waited on the fence\n");

   unsigned wrong = 0;
   for (uint32_t i = 0; i < COUNT; ++i)
      wrong += copy.map[i] != i * MUL;
   printf("  data: %u of %u elements as expected\n", COUNT - wrong, COUNT);

   vkDestroyFence(dev, fence, NULL);
   vkDestroyCommandPool(dev, cpool, NULL);
   vkDestroyDescriptorPool(dev, dp, NULL);
   vkDestroyPipeline(dev, pipe, NULL);
   vkDestroyPipelineLayout(dev, pl, NULL);
   vkDestroyDescriptorSetLayout(dev, dsl, NULL);
   vkDestroyShaderModule(dev, sm, NULL);
   free_buffer(dev, &out);
   free_buffer(dev, &copy);
   vkDestroyDevice(dev, NULL);
   return wrong;
}

int
main(int argc, char **argv)
{
   struct opts o = parse(argc, argv);
   struct mf_instance mi;
   VkResult r = mf_instance_create(&mi, "mesa-fork-vkcheck", o.validate);
   if (r != VK_SUCCESS) {
      fprintf(stderr, "vkCreateInstance: %s\n", mf_result_str(r));
      return 2;
   }

   /* The Khronos loader answers VK_ERROR_INITIALIZATION_FAILED, not zero
    * devices, when no driver has a device to offer.
    */
   uint32_t n = 0;
   VkPhysicalDevice pds[16];
   r = vkEnumeratePhysicalDevices(mi.instance, &n, NULL);
   if (r == VK_ERROR_INITIALIZATION_FAILED) {
      n = 0;
   } else {
      MF_CHECK(r);
      n = n > 16 ? 16 : n;
      MF_CHECK(vkEnumeratePhysicalDevices(mi.instance, &n, pds));
   }

   if (o.list) {
      for (uint32_t i = 0; i < n; ++i)
         list_device(pds[i]);
      mf_instance_destroy(&mi);
      return 0;
   }

   if (n == 0) {
      fprintf(stderr, "mesa-fork-vkcheck: no Vulkan device\n");
      return 1;
   }
   if (o.device >= (int)n) {
      fprintf(stderr, "mesa-fork-vkcheck: no device %d (%u found)\n", o.device,
              n);
      return 1;
   }

   unsigned wrong = 0, ran = 0;
   for (uint32_t i = 0; i < n; ++i) {
      if (o.device >= 0 && (int)i != o.device)
         continue;
      wrong += run_device(pds[i], i);
      ran++;
   }

   unsigned messages = mi.messages;
   mf_instance_destroy(&mi);
   messages = mi.messages;

   printf("summary: %u device(s), validation %s, %u validation message(s)%s\n",
          ran, o.validate ? "on" : "off", messages,
          o.verify ? (wrong ? ", data WRONG" : ", data verified") : "");
   if (messages)
      return 3;
   if (o.verify && wrong)
      return 4;
   return 0;
}
