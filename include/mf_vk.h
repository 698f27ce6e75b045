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

/* A device's properties together with its driver's (name, info, id). */
void mf_get_driver_properties(VkPhysicalDevice pd,
                              VkPhysicalDeviceProperties *props,
                              VkPhysicalDeviceDriverProperties *drv);

/* The first memory type in typeBits that has all of flags, or -1. */
int mf_find_memory_type(const VkPhysicalDeviceMemoryProperties *props,
                        uint32_t type_bits, VkMemoryPropertyFlags flags);

/* Writes "DEVICE_LOCAL|HOST_VISIBLE|..." into buf. */
const char *mf_memory_flags_str(VkMemoryPropertyFlags f, char *buf,
                                size_t size);

/* A device with one queue, of family 0 unless asked otherwise (every driver
 * here has compute there), and what the clients keep asking about it.
 */
struct mf_device {
   VkPhysicalDevice pd;
   VkDevice dev;
   uint32_t family;
   VkQueue queue;
   VkPhysicalDeviceMemoryProperties mp;
   VkCommandPool pool; /* resettable command buffers */
};

/* Exit with a message when the device cannot be created. */
void mf_device_create(struct mf_device *d, VkPhysicalDevice pd,
                      const VkPhysicalDeviceFeatures *features);
void mf_device_create_family(struct mf_device *d, VkPhysicalDevice pd,
                             uint32_t family,
                             const VkPhysicalDeviceFeatures *features);
/* The same with a VkDeviceCreateInfo pNext chain (feature structs). */
void mf_device_create_chain(struct mf_device *d, VkPhysicalDevice pd,
                            uint32_t family,
                            const VkPhysicalDeviceFeatures *features,
                            const void *pnext);
/* The same with device extensions enabled. */
void mf_device_create_ext(struct mf_device *d, VkPhysicalDevice pd,
                          uint32_t family,
                          const VkPhysicalDeviceFeatures *features,
                          const void *pnext, const char *const *extensions,
                          uint32_t extension_count);
void mf_device_destroy(struct mf_device *d);

/* The first physical device, or exits with "no Vulkan device". The Khronos
 * loader answers VK_ERROR_INITIALIZATION_FAILED when there is none.
 */
VkPhysicalDevice mf_first_physical_device(struct mf_instance *mi,
                                          const char *app);

/* A 2D colour image with one mip level and layer, bound to its own
 * allocation, and a view of it.
 */
struct mf_image {
   VkImage image;
   VkDeviceMemory mem;
   VkImageView view;
   VkFormat format;
   uint32_t width, height;
};

/* The aspects of a format: colour, or its depth and stencil ones. */
VkImageAspectFlags mf_format_aspects(VkFormat format);

/* A single-sample, single-level 2D image with optimal tiling. */
VkImageCreateInfo mf_image_2d_info(uint32_t width, uint32_t height,
                                   VkFormat format, VkImageUsageFlags usage);
void mf_image_2d_create(struct mf_device *d, uint32_t width, uint32_t height,
                        VkFormat format, VkImageUsageFlags usage,
                        struct mf_image *out);
void mf_image_destroy(struct mf_device *d, struct mf_image *img);

/* Moves the whole image from UNDEFINED to COLOR_ATTACHMENT_OPTIMAL (a depth
 * format's to DEPTH_ATTACHMENT_OPTIMAL) after (src_stage, src_access), with
 * vkCmdPipelineBarrier2.
 */
void mf_to_color_attachment(VkCommandBuffer cmd, const struct mf_image *img,
                            VkPipelineStageFlags2 src_stage,
                            VkAccessFlags2 src_access);

/* A dynamic-rendering pass over the whole image that only clears it. */
void mf_clear_pass(VkCommandBuffer cmd, const struct mf_image *img);

/* The same with a depth attachment of the same size, cleared to 0.5 and
 * stored as well (depth may be NULL). */
void mf_clear_pass_with_depth(VkCommandBuffer cmd, const struct mf_image *img,
                              const struct mf_image *depth);

struct mf_buffer {
   VkBuffer buf;
   VkDeviceMemory mem;
   VkDeviceSize size;
   int type;
};

/* A buffer bound to its own allocation of memory type `type`, or of the
 * first type having `flags` when type is negative. Exits with a message when
 * the buffer's memoryTypeBits exclude `type`.
 */
void mf_buffer_create(struct mf_device *d, VkDeviceSize size,
                      VkBufferUsageFlags usage, int type,
                      VkMemoryPropertyFlags flags, struct mf_buffer *b);
void mf_buffer_destroy(struct mf_device *d, struct mf_buffer *b);

/* A compute pipeline whose only resource is one storage buffer at set 0,
 * binding 0, plus push_bytes of push constants.
 */
struct mf_compute {
   VkDescriptorSetLayout dsl;
   VkPipelineLayout layout;
   VkDescriptorPool dpool;
   VkDescriptorSet set;
   VkPipeline pipe;
};

void mf_compute_create(struct mf_device *d, const uint32_t *spv,
                       size_t spv_size, uint32_t push_bytes, VkBuffer storage,
                       const VkSpecializationInfo *spec,
                       VkPipelineCreateFlags flags, struct mf_compute *c);

/* Points c's storage buffer binding at range bytes of storage from offset
 * (mf_compute_create binds all of it). */
void mf_compute_set_storage(struct mf_device *d, const struct mf_compute *c,
                            VkBuffer storage, VkDeviceSize offset,
                            VkDeviceSize range);

/* Another pipeline with c's layout and a different specialization. */
VkPipeline mf_compute_pipeline(struct mf_device *d, const struct mf_compute *c,
                               const uint32_t *spv, size_t spv_size,
                               const VkSpecializationInfo *spec,
                               VkPipelineCreateFlags flags);

/* The same with pnext chained to its VkComputePipelineCreateInfo. */
VkPipeline mf_compute_pipeline_ext(struct mf_device *d,
                                   const struct mf_compute *c,
                                   const uint32_t *spv, size_t spv_size,
                                   const VkSpecializationInfo *spec,
                                   VkPipelineCreateFlags flags,
                                   const void *pnext);

/* A pipeline of spv with spec: the first call, with c zeroed, creates c
 * (mf_compute_create), later ones add pipelines with c's layout. */
VkPipeline mf_compute_variant(struct mf_device *d, const uint32_t *spv,
                              size_t spv_size, uint32_t push_bytes,
                              VkBuffer storage, const VkSpecializationInfo *spec,
                              struct mf_compute *c);

/* Binds the pipeline, the set and the push constants. */
void mf_compute_bind(VkCommandBuffer cmd, const struct mf_compute *c,
                     const void *push, uint32_t push_bytes);
void mf_compute_destroy(struct mf_device *d, struct mf_compute *c);

VkCommandBuffer mf_begin(struct mf_device *d, VkCommandBufferLevel level,
                         VkCommandBufferUsageFlags flags);

/* Ends, submits and waits for cmd with a fence. */
void mf_submit_wait(struct mf_device *d, VkCommandBuffer cmd);

/* A global memory barrier from src to dst. */
void mf_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage,
                VkAccessFlags src, VkPipelineStageFlags dst_stage,
                VkAccessFlags dst);
