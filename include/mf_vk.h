/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * Small helpers shared by mesa-fork's Vulkan clients and probes: instance
 * creation with an optional validation layer whose messages are counted,
 * device listing, memory type lookup and error checking.
 */

#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vulkan/vulkan.h>

#define MF_CHECK(call)                                                         \
   do {                                                                        \
      VkResult mf_r_ = (call);                                                 \
      if (mf_r_ != VK_SUCCESS) {                                               \
         fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,  \
                 mf_result_str(mf_r_));                                        \
         exit(2);                                                              \
      }                                                                        \
   } while (0)

struct mf_instance {
   VkInstance instance;
   VkDebugUtilsMessengerEXT messenger;
   bool validation;
   /* Validation messages of warning or error severity seen so far. */
   unsigned messages;
};

const char *mf_result_str(VkResult r);

/* Which of mesa-fork's drivers a device runs on: "asahi", "panfrost",
 * "intel", or "other".
 */
const char *mf_driver_kind(VkDriverId id);

/*
 * Creates an instance for API 1.3. With validation, enables
 * VK_LAYER_KHRONOS_validation and a messenger that prints and counts every
 * warning and error; returns VK_ERROR_LAYER_NOT_PRESENT when the layer is
 * missing rather than running unvalidated.
 */
VkResult mf_instance_create(struct mf_instance *mi, const char *app,
                            bool validation);
void mf_instance_destroy(struct mf_instance *mi);

/* The first memory type in typeBits that has all of flags, or -1. */
int mf_find_memory_type(const VkPhysicalDeviceMemoryProperties *props,
                        uint32_t type_bits, VkMemoryPropertyFlags flags);

/* Writes "DEVICE_LOCAL|HOST_VISIBLE|..." into buf. */
const char *mf_memory_flags_str(VkMemoryPropertyFlags f, char *buf,
                                size_t size);
