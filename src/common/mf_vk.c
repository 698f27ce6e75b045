/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 */

#include "mf_vk.h"

#include <string.h>

const char *
mf_result_str(VkResult r)
{
   switch (r) {
#define CASE(x)                                                                \
   case x:                                                                     \
      return #x
      CASE(VK_SUCCESS);
      CASE(VK_NOT_READY);
      CASE(VK_TIMEOUT);
      CASE(VK_INCOMPLETE);
      CASE(VK_ERROR_OUT_OF_HOST_MEMORY);
      CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY);
      CASE(VK_ERROR_INITIALIZATION_FAILED);
      CASE(VK_ERROR_DEVICE_LOST);
      CASE(VK_ERROR_MEMORY_MAP_FAILED);
      CASE(VK_ERROR_LAYER_NOT_PRESENT);
      CASE(VK_ERROR_EXTENSION_NOT_PRESENT);
      CASE(VK_ERROR_FEATURE_NOT_PRESENT);
      CASE(VK_ERROR_INCOMPATIBLE_DRIVER);
      CASE(VK_ERROR_TOO_MANY_OBJECTS);
      CASE(VK_ERROR_FORMAT_NOT_SUPPORTED);
      CASE(VK_ERROR_UNKNOWN);
#undef CASE
   default:
      return "VkResult(?)";
   }
}

/* VK_DRIVER_ID_MESA_HONEYKRISP, absent from headers before 1.3.287. */
#define MF_DRIVER_ID_HONEYKRISP ((VkDriverId)26)

const char *
mf_driver_kind(VkDriverId id)
{
   if (id == MF_DRIVER_ID_HONEYKRISP)
      return "asahi";
   if (id == VK_DRIVER_ID_MESA_PANVK)
      return "panfrost";
   if (id == VK_DRIVER_ID_INTEL_OPEN_SOURCE_MESA)
      return "intel";
   return "other";
}

static VKAPI_ATTR VkBool32 VKAPI_CALL
mf_messenger_cb(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                VkDebugUtilsMessageTypeFlagsEXT types,
                const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
   struct mf_instance *mi = user;
   mi->messages++;
   fprintf(stderr, "validation %s: %s\n",
           (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
              ? "error"
              : "warning",
           data->pMessage);
   return VK_FALSE;
}

static bool
have_layer(const char *name)
{
   uint32_t n = 0;
   vkEnumerateInstanceLayerProperties(&n, NULL);
   VkLayerProperties *props = calloc(n ? n : 1, sizeof(*props));
   vkEnumerateInstanceLayerProperties(&n, props);
   bool found = false;
   for (uint32_t i = 0; i < n; ++i)
      found |= !strcmp(props[i].layerName, name);
   free(props);
   return found;
}

VkResult
mf_instance_create(struct mf_instance *mi, const char *app, bool validation)
{
   static const char *layer = "VK_LAYER_KHRONOS_validation";
   static const char *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;

   memset(mi, 0, sizeof(*mi));
   mi->validation = validation;

   if (validation && !have_layer(layer)) {
      fprintf(stderr, "%s: %s is not installed\n", app, layer);
      return VK_ERROR_LAYER_NOT_PRESENT;
   }

   VkDebugUtilsMessengerCreateInfoEXT dbg = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
      .pfnUserCallback = mf_messenger_cb,
      .pUserData = mi,
   };
   VkApplicationInfo ai = {
      .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
      .pApplicationName = app,
      .apiVersion = VK_API_VERSION_1_3,
   };
   VkInstanceCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
      .pNext = validation ? &dbg : NULL,
      .pApplicationInfo = &ai,
      .enabledLayerCount = validation ? 1 : 0,
      .ppEnabledLayerNames = &layer,
      .enabledExtensionCount = validation ? 1 : 0,
      .ppEnabledExtensionNames = &ext,
   };

   VkResult r = vkCreateInstance(&ci, NULL, &mi->instance);
   if (r != VK_SUCCESS || !validation)
      return r;

   PFN_vkCreateDebugUtilsMessengerEXT create =
      (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
         mi->instance, "vkCreateDebugUtilsMessengerEXT");
   return create(mi->instance, &dbg, NULL, &mi->messenger);
}

void
mf_instance_destroy(struct mf_instance *mi)
{
   if (mi->messenger) {
      PFN_vkDestroyDebugUtilsMessengerEXT destroy =
         (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            mi->instance, "vkDestroyDebugUtilsMessengerEXT");
      destroy(mi->instance, mi->messenger, NULL);
   }
   if (mi->instance)
      vkDestroyInstance(mi->instance, NULL);
}

int
mf_find_memory_type(const VkPhysicalDeviceMemoryProperties *props,
                    uint32_t type_bits, VkMemoryPropertyFlags flags)
{
   for (uint32_t i = 0; i < props->memoryTypeCount; ++i) {
      if ((type_bits & (1u << i)) &&
          (props->memoryTypes[i].propertyFlags & flags) == flags)
         return i;
   }
   return -1;
}

const char *
mf_memory_flags_str(VkMemoryPropertyFlags f, char *buf, size_t size)
{
   static const struct {
      VkMemoryPropertyFlags bit;
      const char *name;
   } names[] = {
      {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "DEVICE_LOCAL"},
      {VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, "HOST_VISIBLE"},
      {VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, "HOST_COHERENT"},
      {VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "HOST_CACHED"},
      {VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT, "LAZILY_ALLOCATED"},
      {VK_MEMORY_PROPERTY_PROTECTED_BIT, "PROTECTED"},
   };
   size_t len = 0;
   buf[0] = '\0';
   for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
      if (f & names[i].bit)
         len += snprintf(buf + len, len < size ? size - len : 0, "%s%s",
                         len ? "|" : "", names[i].name);
   }
   if (!len)
      snprintf(buf, size, "0");
   return buf;
}
