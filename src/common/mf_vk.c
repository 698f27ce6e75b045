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
      CASE(VK_ERROR_NOT_PERMITTED_KHR);
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
   __atomic_fetch_add(&mi->messages, 1, __ATOMIC_RELAXED); /* any thread */
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

void
mf_get_driver_properties(VkPhysicalDevice pd, VkPhysicalDeviceProperties *props,
                         VkPhysicalDeviceDriverProperties *drv)
{
   *drv = (VkPhysicalDeviceDriverProperties){
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
   };
   VkPhysicalDeviceProperties2 p = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
      .pNext = drv,
   };
   vkGetPhysicalDeviceProperties2(pd, &p);
   *props = p.properties;
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

void
mf_device_create(struct mf_device *d, VkPhysicalDevice pd,
                 const VkPhysicalDeviceFeatures *features)
{
   mf_device_create_family(d, pd, 0, features);
}

void
mf_device_create_family(struct mf_device *d, VkPhysicalDevice pd,
                        uint32_t family,
                        const VkPhysicalDeviceFeatures *features)
{
   mf_device_create_chain(d, pd, family, features, NULL);
}

void
mf_device_create_chain(struct mf_device *d, VkPhysicalDevice pd,
                       uint32_t family,
                       const VkPhysicalDeviceFeatures *features,
                       const void *pnext)
{
   mf_device_create_ext(d, pd, family, features, pnext, NULL, 0);
}

void
mf_device_create_ext(struct mf_device *d, VkPhysicalDevice pd, uint32_t family,
                     const VkPhysicalDeviceFeatures *features,
                     const void *pnext, const char *const *extensions,
                     uint32_t extension_count)
{
   float prio = 1.0f;
   VkDeviceQueueCreateInfo qci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = family,
      .queueCount = 1,
      .pQueuePriorities = &prio,
   };
   VkDeviceCreateInfo dci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .pNext = pnext,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &qci,
      .enabledExtensionCount = extension_count,
      .ppEnabledExtensionNames = extensions,
      .pEnabledFeatures = features,
   };
   memset(d, 0, sizeof(*d));
   d->pd = pd;
   d->family = family;
   MF_CHECK(vkCreateDevice(pd, &dci, NULL, &d->dev));
   vkGetDeviceQueue(d->dev, family, 0, &d->queue);
   vkGetPhysicalDeviceMemoryProperties(pd, &d->mp);
   VkCommandPoolCreateInfo pci = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
      .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
      .queueFamilyIndex = family,
   };
   MF_CHECK(vkCreateCommandPool(d->dev, &pci, NULL, &d->pool));
}

void
mf_device_destroy(struct mf_device *d)
{
   vkDestroyCommandPool(d->dev, d->pool, NULL);
   vkDestroyDevice(d->dev, NULL);
}

VkPhysicalDevice
mf_first_physical_device(struct mf_instance *mi, const char *app)
{
   uint32_t n = 1;
   VkPhysicalDevice pd = VK_NULL_HANDLE;
   VkResult r = vkEnumeratePhysicalDevices(mi->instance, &n, &pd);
   if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
      fprintf(stderr, "%s: no Vulkan device\n", app);
      exit(1);
   }
   return pd;
}

void
mf_buffer_create(struct mf_device *d, VkDeviceSize size,
                 VkBufferUsageFlags usage, int type,
                 VkMemoryPropertyFlags flags, struct mf_buffer *b)
{
   VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage = usage,
   };
   MF_CHECK(vkCreateBuffer(d->dev, &bci, NULL, &b->buf));
   VkMemoryRequirements req;
   vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
   if (type < 0)
      type = mf_find_memory_type(&d->mp, req.memoryTypeBits, flags);
   if (type < 0) {
      fprintf(stderr, "no memory type for the buffer\n");
      exit(2);
   }
   if (!(req.memoryTypeBits & (1u << type))) {
      fprintf(stderr,
              "memory type %d cannot back this buffer (memoryTypeBits 0x%x)\n",
              type, req.memoryTypeBits);
      exit(2);
   }
   VkMemoryAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = req.size,
      .memoryTypeIndex = type,
   };
   MF_CHECK(vkAllocateMemory(d->dev, &ai, NULL, &b->mem));
   MF_CHECK(vkBindBufferMemory(d->dev, b->buf, b->mem, 0));
   b->size = size;
   b->type = type;
}

void
mf_buffer_destroy(struct mf_device *d, struct mf_buffer *b)
{
   vkDestroyBuffer(d->dev, b->buf, NULL);
   vkFreeMemory(d->dev, b->mem, NULL);
}

VkImageCreateInfo
mf_image_2d_info(uint32_t width, uint32_t height, VkFormat format,
                 VkImageUsageFlags usage)
{
   return (VkImageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
      .imageType = VK_IMAGE_TYPE_2D,
      .format = format,
      .extent = {width, height, 1},
      .mipLevels = 1,
      .arrayLayers = 1,
      .samples = VK_SAMPLE_COUNT_1_BIT,
      .tiling = VK_IMAGE_TILING_OPTIMAL,
      .usage = usage,
      .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
   };
}

VkImageAspectFlags
mf_format_aspects(VkFormat format)
{
   switch (format) {
   case VK_FORMAT_D16_UNORM:
   case VK_FORMAT_X8_D24_UNORM_PACK32:
   case VK_FORMAT_D32_SFLOAT:
      return VK_IMAGE_ASPECT_DEPTH_BIT;
   case VK_FORMAT_S8_UINT:
      return VK_IMAGE_ASPECT_STENCIL_BIT;
   case VK_FORMAT_D16_UNORM_S8_UINT:
   case VK_FORMAT_D24_UNORM_S8_UINT:
   case VK_FORMAT_D32_SFLOAT_S8_UINT:
      return VK_IMAGE_ASPECT_DEPTH_BIT | VK_IMAGE_ASPECT_STENCIL_BIT;
   default:
      return VK_IMAGE_ASPECT_COLOR_BIT;
   }
}

void
mf_image_2d_create(struct mf_device *d, uint32_t width, uint32_t height,
                   VkFormat format, VkImageUsageFlags usage,
                   struct mf_image *out)
{
   VkImageCreateInfo ici = mf_image_2d_info(width, height, format, usage);
   out->format = format;
   out->width = width;
   out->height = height;
   MF_CHECK(vkCreateImage(d->dev, &ici, NULL, &out->image));
   VkMemoryRequirements req;
   vkGetImageMemoryRequirements(d->dev, out->image, &req);
   VkMemoryAllocateInfo mai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = req.size,
      .memoryTypeIndex = mf_find_memory_type(&d->mp, req.memoryTypeBits, 0),
   };
   MF_CHECK(vkAllocateMemory(d->dev, &mai, NULL, &out->mem));
   MF_CHECK(vkBindImageMemory(d->dev, out->image, out->mem, 0));
   VkImageViewCreateInfo vci = {
      .sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO,
      .image = out->image,
      .viewType = VK_IMAGE_VIEW_TYPE_2D,
      .format = format,
      .subresourceRange = {mf_format_aspects(format), 0, 1, 0, 1},
   };
   MF_CHECK(vkCreateImageView(d->dev, &vci, NULL, &out->view));
}

void
mf_to_color_attachment(VkCommandBuffer cmd, const struct mf_image *img,
                       VkPipelineStageFlags2 src_stage,
                       VkAccessFlags2 src_access)
{
   bool depth = mf_format_aspects(img->format) != VK_IMAGE_ASPECT_COLOR_BIT;
   VkImageMemoryBarrier2 ib = {
      .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER_2,
      .srcStageMask = src_stage,
      .srcAccessMask = src_access,
      .dstStageMask = depth ? VK_PIPELINE_STAGE_2_EARLY_FRAGMENT_TESTS_BIT |
                                 VK_PIPELINE_STAGE_2_LATE_FRAGMENT_TESTS_BIT
                            : VK_PIPELINE_STAGE_2_COLOR_ATTACHMENT_OUTPUT_BIT,
      .dstAccessMask = depth ? VK_ACCESS_2_DEPTH_STENCIL_ATTACHMENT_WRITE_BIT
                             : VK_ACCESS_2_COLOR_ATTACHMENT_WRITE_BIT,
      .oldLayout = VK_IMAGE_LAYOUT_UNDEFINED,
      .newLayout = depth ? VK_IMAGE_LAYOUT_DEPTH_ATTACHMENT_OPTIMAL
                         : VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
      .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
      .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
      .image = img->image,
      .subresourceRange = {mf_format_aspects(img->format), 0, 1, 0, 1},
   };
   VkDependencyInfo dep = {
      .sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO,
      .imageMemoryBarrierCount = 1,
      .pImageMemoryBarriers = &ib,
   };
   vkCmdPipelineBarrier2(cmd, &dep);
}

void
mf_clear_pass_with_depth(VkCommandBuffer cmd, const struct mf_image *img,
                         const struct mf_image *depth)
{
   VkRenderingAttachmentInfo color = {
      .sType = VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO,
      .imageView = img->view,
      .imageLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
      .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
      .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
      .clearValue.color.float32 = {0.25f, 0.5f, 0.75f, 1.0f},
   };
   VkRenderingAttachmentInfo depth_att = color;
   if (depth) {
      depth_att.imageView = depth->view;
      depth_att.imageLayout = VK_IMAGE_LAYOUT_DEPTH_ATTACHMENT_OPTIMAL;
      depth_att.clearValue.depthStencil = (VkClearDepthStencilValue){0.5f, 0};
   }
   VkRenderingInfo ri = {
      .sType = VK_STRUCTURE_TYPE_RENDERING_INFO,
      .renderArea = {{0, 0}, {img->width, img->height}},
      .layerCount = 1,
      .colorAttachmentCount = 1,
      .pColorAttachments = &color,
      .pDepthAttachment = depth ? &depth_att : NULL,
   };
   vkCmdBeginRendering(cmd, &ri);
   vkCmdEndRendering(cmd);
}

void
mf_clear_pass(VkCommandBuffer cmd, const struct mf_image *img)
{
   mf_clear_pass_with_depth(cmd, img, NULL);
}

void
mf_image_destroy(struct mf_device *d, struct mf_image *img)
{
   vkDestroyImageView(d->dev, img->view, NULL);
   vkDestroyImage(d->dev, img->image, NULL);
   vkFreeMemory(d->dev, img->mem, NULL);
}

VkPipeline
mf_compute_pipeline(struct mf_device *d, const struct mf_compute *c,
                    const uint32_t *spv, size_t spv_size,
                    const VkSpecializationInfo *spec,
                    VkPipelineCreateFlags flags)
{
   return mf_compute_pipeline_ext(d, c, spv, spv_size, spec, flags, NULL);
}

VkPipeline
mf_compute_pipeline_ext(struct mf_device *d, const struct mf_compute *c,
                        const uint32_t *spv, size_t spv_size,
                        const VkSpecializationInfo *spec,
                        VkPipelineCreateFlags flags, const void *pnext)
{
   VkShaderModuleCreateInfo smci = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = spv_size,
      .pCode = spv,
   };
   VkShaderModule sm;
   MF_CHECK(vkCreateShaderModule(d->dev, &smci, NULL, &sm));
   VkComputePipelineCreateInfo cpci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .pNext = pnext,
      .flags = flags,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = sm,
                .pName = "main",
                .pSpecializationInfo = spec},
      .layout = c->layout,
   };
   VkPipeline pipe;
   MF_CHECK(vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &cpci, NULL,
                                     &pipe));
   vkDestroyShaderModule(d->dev, sm, NULL);
   return pipe;
}

VkPipeline
mf_compute_variant(struct mf_device *d, const uint32_t *spv, size_t spv_size,
                   uint32_t push_bytes, VkBuffer storage,
                   const VkSpecializationInfo *spec, struct mf_compute *c)
{
   if (c->layout == VK_NULL_HANDLE) {
      mf_compute_create(d, spv, spv_size, push_bytes, storage, spec, 0, c);
      return c->pipe;
   }
   return mf_compute_pipeline(d, c, spv, spv_size, spec, 0);
}

void
mf_compute_create(struct mf_device *d, const uint32_t *spv, size_t spv_size,
                  uint32_t push_bytes, VkBuffer storage,
                  const VkSpecializationInfo *spec, VkPipelineCreateFlags flags,
                  struct mf_compute *c)
{
   VkDescriptorSetLayoutBinding b = {
      .binding = 0,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .descriptorCount = 1,
      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
   };
   VkDescriptorSetLayoutCreateInfo dslci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = 1,
      .pBindings = &b,
   };
   MF_CHECK(vkCreateDescriptorSetLayout(d->dev, &dslci, NULL, &c->dsl));
   VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
   VkPipelineLayoutCreateInfo plci = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .setLayoutCount = 1,
      .pSetLayouts = &c->dsl,
      .pushConstantRangeCount = push_bytes ? 1 : 0,
      .pPushConstantRanges = &pcr,
   };
   MF_CHECK(vkCreatePipelineLayout(d->dev, &plci, NULL, &c->layout));
   c->pipe = mf_compute_pipeline(d, c, spv, spv_size, spec, flags);

   VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
   VkDescriptorPoolCreateInfo dpci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
      .maxSets = 1,
      .poolSizeCount = 1,
      .pPoolSizes = &ps,
   };
   MF_CHECK(vkCreateDescriptorPool(d->dev, &dpci, NULL, &c->dpool));
   VkDescriptorSetAllocateInfo dsai = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
      .descriptorPool = c->dpool,
      .descriptorSetCount = 1,
      .pSetLayouts = &c->dsl,
   };
   MF_CHECK(vkAllocateDescriptorSets(d->dev, &dsai, &c->set));
   mf_compute_set_storage(d, c, storage, 0, VK_WHOLE_SIZE);
}

void
mf_compute_set_storage(struct mf_device *d, const struct mf_compute *c,
                       VkBuffer storage, VkDeviceSize offset,
                       VkDeviceSize range)
{
   VkDescriptorBufferInfo dbi = {storage, offset, range};
   VkWriteDescriptorSet w = {
      .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
      .dstSet = c->set,
      .descriptorCount = 1,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .pBufferInfo = &dbi,
   };
   vkUpdateDescriptorSets(d->dev, 1, &w, 0, NULL);
}

void
mf_compute_bind(VkCommandBuffer cmd, const struct mf_compute *c,
                const void *push, uint32_t push_bytes)
{
   vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipe);
   vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->layout, 0,
                           1, &c->set, 0, NULL);
   if (push_bytes) {
      vkCmdPushConstants(cmd, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                         push_bytes, push);
   }
}

void
mf_compute_destroy(struct mf_device *d, struct mf_compute *c)
{
   vkDestroyPipeline(d->dev, c->pipe, NULL);
   vkDestroyDescriptorPool(d->dev, c->dpool, NULL);
   vkDestroyPipelineLayout(d->dev, c->layout, NULL);
   vkDestroyDescriptorSetLayout(d->dev, c->dsl, NULL);
}

VkCommandBuffer
mf_begin(struct mf_device *d, VkCommandBufferLevel level,
         VkCommandBufferUsageFlags flags)
{
   VkCommandBufferAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = d->pool,
      .level = level,
      .commandBufferCount = 1,
   };
   VkCommandBuffer cmd;
   MF_CHECK(vkAllocateCommandBuffers(d->dev, &ai, &cmd));
   VkCommandBufferInheritanceInfo inh = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO,
   };
   VkCommandBufferBeginInfo bi = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      .flags = flags,
      .pInheritanceInfo = &inh,
   };
   MF_CHECK(vkBeginCommandBuffer(cmd, &bi));
   return cmd;
}

void
mf_submit_wait(struct mf_device *d, VkCommandBuffer cmd)
{
   MF_CHECK(vkEndCommandBuffer(cmd));
   VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
   VkFence fence;
   MF_CHECK(vkCreateFence(d->dev, &fci, NULL, &fence));
   VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &cmd,
   };
   MF_CHECK(vkQueueSubmit(d->queue, 1, &si, fence));
   MF_CHECK(vkWaitForFences(d->dev, 1, &fence, VK_TRUE, 60000000000ull));
   vkDestroyFence(d->dev, fence, NULL);
}

void
mf_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage,
           VkAccessFlags src, VkPipelineStageFlags dst_stage,
           VkAccessFlags dst)
{
   VkMemoryBarrier mb = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = src,
      .dstAccessMask = dst,
   };
   vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0,
                        NULL);
}
