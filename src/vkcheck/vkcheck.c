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
 *   mesa-fork-vkcheck --list        one JSON line per device (its deviceUUID too)
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

/* deviceUUID: one GPU listed by two drivers (the distribution's Mesa and
 * the fork's) has the same one; mesa-fork run refuses that. All zero when
 * the driver gives none. */
static void
device_uuid(VkPhysicalDevice pd, char out[2 * VK_UUID_SIZE + 1])
{
   VkPhysicalDeviceIDProperties id = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
   };
   VkPhysicalDeviceProperties2 p = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
      .pNext = &id,
   };
   vkGetPhysicalDeviceProperties2(pd, &p);
   for (unsigned i = 0; i < VK_UUID_SIZE; ++i)
      snprintf(out + 2 * i, 3, "%02x", id.deviceUUID[i]);
}

static void
list_device(VkPhysicalDevice pd)
{
   VkPhysicalDeviceProperties props;
   VkPhysicalDeviceDriverProperties drv;
   char uuid[2 * VK_UUID_SIZE + 1];
   mf_get_driver_properties(pd, &props, &drv);
   device_uuid(pd, uuid);
   printf("{\"name\": ");
   json_str(props.deviceName);
   printf(", \"driver\": ");
   json_str(drv.driverName);
   printf(", \"driver_kind\": \"%s\", \"info\": ", mf_driver_kind(drv.driverID));
   json_str(drv.driverInfo);
   printf(", \"api\": \"%u.%u.%u\", \"device_type\": %d, \"uuid\": \"%s\"}\n",
          VK_API_VERSION_MAJOR(props.apiVersion),
          VK_API_VERSION_MINOR(props.apiVersion),
          VK_API_VERSION_PATCH(props.apiVersion),
          props.deviceType, uuid);
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

   struct mf_device d;
   mf_device_create_family(&d, pd, family, NULL);
   printf("  created device, compute queue family %u\n", family);

   const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
   struct mf_buffer out, copy;
   mf_buffer_create(&d, COUNT * sizeof(uint32_t),
                    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                       VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                    -1, host, &out);
   mf_buffer_create(&d, COUNT * sizeof(uint32_t),
                    VK_BUFFER_USAGE_TRANSFER_DST_BIT, -1, host, &copy);
   uint32_t *out_map, *copy_map;
   MF_CHECK(vkMapMemory(d.dev, out.mem, 0, VK_WHOLE_SIZE, 0, (void **)&out_map));
   MF_CHECK(vkMapMemory(d.dev, copy.mem, 0, VK_WHOLE_SIZE, 0, (void **)&copy_map));
   memset(out_map, 0xff, COUNT * sizeof(uint32_t));
   memset(copy_map, 0xee, COUNT * sizeof(uint32_t));
   printf("  allocated and mapped 2 x %zu bytes of host-visible memory\n",
          COUNT * sizeof(uint32_t));

   struct mf_compute c;
   mf_compute_create(&d, fill_spv, sizeof(fill_spv), 2 * sizeof(uint32_t),
                     out.buf, NULL, 0, &c);
   printf("  compiled compute pipeline (%zu bytes of SPIR-V)\n",
          sizeof(fill_spv));

   VkCommandBuffer cmd = mf_begin(&d, VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                  VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
   uint32_t push[2] = {MUL, COUNT};
   mf_compute_bind(cmd, &c, push, sizeof(push));
   vkCmdDispatch(cmd, COUNT / 64, 1, 1);
   mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
              VK_ACCESS_TRANSFER_READ_BIT);
   VkBufferCopy region = {0, 0, COUNT * sizeof(uint32_t)};
   vkCmdCopyBuffer(cmd, out.buf, copy.buf, 1, &region);
   mf_barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
              VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
   printf("  recorded dispatch %ux1x1, pipeline barrier, copy of %zu bytes\n",
          COUNT / 64, COUNT * sizeof(uint32_t));

   mf_submit_wait(&d, cmd);
   printf("  submitted and waited on the fence\n");

   unsigned wrong = 0;
   for (uint32_t i = 0; i < COUNT; i++)
      wrong += copy_map[i] != i * MUL;
   printf("  data: %u of %u elements as expected\n", COUNT - wrong, COUNT);

   vkUnmapMemory(d.dev, out.mem);
   vkUnmapMemory(d.dev, copy.mem);
   mf_compute_destroy(&d, &c);
   mf_buffer_destroy(&d, &out);
   mf_buffer_destroy(&d, &copy);
   mf_device_destroy(&d);
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
