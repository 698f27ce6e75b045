/* SPDX-License-Identifier: MIT */
/*
 * VK_LAYER_MESAFORK_synctrace: an explicit Vulkan layer that writes one JSON
 * line per event the synchronization analysis of `mesa-fork bench sync`
 * needs and the Khronos validation layer does not print: the byte range of
 * every buffer descriptor a dispatch reads through, the buffers' sizes, the
 * object and region names the application gives, and where the barriers
 * are. It changes nothing: every call goes down the chain unchanged.
 *
 * Enable it before the validation layer, so both see the same handles:
 *   VK_INSTANCE_LAYERS=VK_LAYER_MESAFORK_synctrace:VK_LAYER_KHRONOS_validation
 *   MESA_FORK_SYNCTRACE=/path/to/trace.jsonl, or "stdout": there every
 *   event precedes the validation messages its call produced.
 *
 * Events ("ev"): buffer (handle, size), alloc (size, memory type), name (object type, handle, name),
 * layout_binding and set_layout (binding sizes of each set), write
 * (descriptor set, binding, array element, buffer, offset, range), copy
 * (descriptor set copy), begin (command buffer), pipeline, sets
 * (vkCmdBindDescriptorSets), push (push constant bytes), label, end_label,
 * dispatch, barrier, copy_cmd (transfers that touch buffers).
 *
 * Not traced, so a hazard about them stays unexplained (the parser says
 * "unknown"): push descriptors, descriptor update templates, dynamic
 * offsets, secondary command buffers, and the *2 and KHR aliases of the
 * copy and dispatch commands. ggml uses none of them today.
 */

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_OBJECTS 16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;

/* Dispatchable handles share their parent's loader dispatch table pointer,
 * which keys the next layer's entry points. */
typedef void *dispatch_key;
static dispatch_key key_of(const void *handle) { return *(dispatch_key *)handle; }

struct instance_entry {
   dispatch_key key;
   PFN_vkGetInstanceProcAddr gipa;
   PFN_vkDestroyInstance DestroyInstance;
};

struct device_entry {
   dispatch_key key;
   PFN_vkGetDeviceProcAddr gdpa;
   PFN_vkDestroyDevice DestroyDevice;
   PFN_vkCreateBuffer CreateBuffer;
   PFN_vkAllocateMemory AllocateMemory;
   PFN_vkUpdateDescriptorSets UpdateDescriptorSets;
   PFN_vkCreateDescriptorSetLayout CreateDescriptorSetLayout;
   PFN_vkAllocateDescriptorSets AllocateDescriptorSets;
   PFN_vkCmdPushConstants CmdPushConstants;
   PFN_vkSetDebugUtilsObjectNameEXT SetDebugUtilsObjectNameEXT;
   PFN_vkBeginCommandBuffer BeginCommandBuffer;
   PFN_vkCmdBindPipeline CmdBindPipeline;
   PFN_vkCmdBindDescriptorSets CmdBindDescriptorSets;
   PFN_vkCmdBeginDebugUtilsLabelEXT CmdBeginDebugUtilsLabelEXT;
   PFN_vkCmdEndDebugUtilsLabelEXT CmdEndDebugUtilsLabelEXT;
   PFN_vkCmdDispatch CmdDispatch;
   PFN_vkCmdDispatchBase CmdDispatchBase;
   PFN_vkCmdDispatchIndirect CmdDispatchIndirect;
   PFN_vkCmdPipelineBarrier CmdPipelineBarrier;
   PFN_vkCmdPipelineBarrier2 CmdPipelineBarrier2;
   PFN_vkCmdCopyBuffer CmdCopyBuffer;
   PFN_vkCmdFillBuffer CmdFillBuffer;
};

static struct instance_entry instances[MAX_OBJECTS];
static struct device_entry devices[MAX_OBJECTS];

/* Entries are added at create and cleared at destroy, under the lock, so a
 * later object that reuses a dispatch key never meets a stale entry. */
static struct instance_entry *
instance_of(const void *handle)
{
   struct instance_entry *found = NULL;
   pthread_mutex_lock(&lock);
   for (int i = 0; i < MAX_OBJECTS && !found; i++) {
      if (instances[i].key && instances[i].key == key_of(handle))
         found = &instances[i];
   }
   pthread_mutex_unlock(&lock);
   return found;
}

static struct device_entry *
find_device(const void *handle)
{
   struct device_entry *found = NULL;
   pthread_mutex_lock(&lock);
   for (int i = 0; i < MAX_OBJECTS && !found; i++) {
      if (devices[i].key && devices[i].key == key_of(handle))
         found = &devices[i];
   }
   pthread_mutex_unlock(&lock);
   return found;
}

/* Every dispatchable handle our entry points see came through our
 * vkCreateDevice; anything else is a bug worth stopping on. */
static struct device_entry *
device_of(const void *handle)
{
   struct device_entry *d = find_device(handle);
   if (!d) {
      fprintf(stderr, "VK_LAYER_MESAFORK_synctrace: unknown device or command buffer\n");
      abort();
   }
   return d;
}

/* The next layer's entry point, or a clear stop when the device lacks it
 * (an application may take device commands from vkGetInstanceProcAddr). */
static PFN_vkVoidFunction
next_or_die(PFN_vkVoidFunction f, const char *name)
{
   if (!f) {
      fprintf(stderr, "VK_LAYER_MESAFORK_synctrace: the application called %s, which "
                      "this device does not provide\n", name);
      abort();
   }
   return f;
}

#define NEXT(obj, fn) ((PFN_vk##fn)next_or_die((PFN_vkVoidFunction)device_of(obj)->fn, "vk" #fn))

/* Prints one event line; fmt holds the fields after "ev". */
static void __attribute__((format(printf, 2, 3)))
emit(const char *ev, const char *fmt, ...)
{
   if (!out)
      return;
   va_list ap;
   va_start(ap, fmt);
   pthread_mutex_lock(&lock);
   fprintf(out, "{\"ev\":\"%s\",", ev);
   vfprintf(out, fmt, ap);
   fputs("}\n", out);
   fflush(out);
   pthread_mutex_unlock(&lock);
   va_end(ap);
}

/* A string as JSON (names come from the application). */
static void
json_string(char *dst, size_t size, const char *s)
{
   size_t n = 0;
   for (; s && *s && n + 7 < size; s++) {
      unsigned char c = *s;
      if (c == '"' || c == '\\') {
         dst[n++] = '\\';
         dst[n++] = c;
      } else if (c < 0x20 || c >= 0x80) {
         /* Control characters, and bytes that may not be UTF-8. */
         n += snprintf(dst + n, size - n, "\\u%04x", c);
      } else {
         dst[n++] = c;
      }
   }
   dst[n] = 0;
}

#define H(x) ((uint64_t)(uintptr_t)(x))

static VKAPI_ATTR VkResult VKAPI_CALL
CreateBuffer(VkDevice device, const VkBufferCreateInfo *info, const VkAllocationCallbacks *alloc,
             VkBuffer *buffer)
{
   VkResult r = NEXT(device, CreateBuffer)(device, info, alloc, buffer);
   if (r == VK_SUCCESS)
      emit("buffer", "\"buffer\":%" PRIu64 ",\"size\":%" PRIu64, H(*buffer), info->size);
   return r;
}

/* Which memory type each allocation took (ANV's PAT per type is in the
 * intel drm-shim's log). */
static VKAPI_ATTR VkResult VKAPI_CALL
AllocateMemory(VkDevice device, const VkMemoryAllocateInfo *info,
               const VkAllocationCallbacks *alloc, VkDeviceMemory *memory)
{
   VkResult r = NEXT(device, AllocateMemory)(device, info, alloc, memory);
   emit("alloc", "\"size\":%" PRIu64 ",\"type\":%u,\"result\":%d", info->allocationSize,
        info->memoryTypeIndex, r);
   return r;
}

static VKAPI_ATTR void VKAPI_CALL
UpdateDescriptorSets(VkDevice device, uint32_t nwrites, const VkWriteDescriptorSet *writes,
                     uint32_t ncopies, const VkCopyDescriptorSet *copies)
{
   for (uint32_t i = 0; i < nwrites; i++) {
      const VkWriteDescriptorSet *w = &writes[i];
      if (w->descriptorType != VK_DESCRIPTOR_TYPE_STORAGE_BUFFER &&
          w->descriptorType != VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER &&
          w->descriptorType != VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC &&
          w->descriptorType != VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC)
         continue;
      if (!w->pBufferInfo)
         continue; /* invalid usage: the validation layer after us says so */
      for (uint32_t e = 0; e < w->descriptorCount; e++) {
         const VkDescriptorBufferInfo *b = &w->pBufferInfo[e];
         emit("write",
              "\"set\":%" PRIu64 ",\"binding\":%u,\"element\":%u,\"type\":%d,"
              "\"buffer\":%" PRIu64 ",\"offset\":%" PRIu64 ",\"range\":%" PRIu64,
              H(w->dstSet), w->dstBinding, w->dstArrayElement + e, w->descriptorType,
              H(b->buffer), b->offset, b->range);
      }
   }
   for (uint32_t i = 0; i < ncopies; i++) {
      emit("copy",
           "\"src\":%" PRIu64 ",\"src_binding\":%u,\"dst\":%" PRIu64 ",\"dst_binding\":%u",
           H(copies[i].srcSet), copies[i].srcBinding, H(copies[i].dstSet),
           copies[i].dstBinding);
   }
   NEXT(device, UpdateDescriptorSets)(device, nwrites, writes, ncopies, copies);
}

/* Binding sizes: a write past a binding's descriptorCount continues into
 * the next binding, and ggml writes all of a set's bindings that way. */
static VKAPI_ATTR VkResult VKAPI_CALL
CreateDescriptorSetLayout(VkDevice device, const VkDescriptorSetLayoutCreateInfo *info,
                          const VkAllocationCallbacks *alloc, VkDescriptorSetLayout *layout)
{
   VkResult r = NEXT(device, CreateDescriptorSetLayout)(device, info, alloc, layout);
   if (r != VK_SUCCESS)
      return r;
   for (uint32_t i = 0; i < info->bindingCount; i++)
      emit("layout_binding", "\"layout\":%" PRIu64 ",\"binding\":%u,\"count\":%u",
           H(*layout), info->pBindings[i].binding, info->pBindings[i].descriptorCount);
   return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL
AllocateDescriptorSets(VkDevice device, const VkDescriptorSetAllocateInfo *info,
                       VkDescriptorSet *sets)
{
   VkResult r = NEXT(device, AllocateDescriptorSets)(device, info, sets);
   if (r != VK_SUCCESS)
      return r;
   for (uint32_t i = 0; i < info->descriptorSetCount; i++)
      emit("set_layout", "\"set\":%" PRIu64 ",\"layout\":%" PRIu64, H(sets[i]),
           H(info->pSetLayouts[i]));
   return r;
}

/* The bytes, as hex: ggml's push constants hold element counts. */
static VKAPI_ATTR void VKAPI_CALL
CmdPushConstants(VkCommandBuffer cb, VkPipelineLayout layout, VkShaderStageFlags stages,
                 uint32_t offset, uint32_t size, const void *values)
{
   char hex[2 * 256 + 1];
   uint32_t n = size < 256 ? size : 256;
   for (uint32_t i = 0; i < n; i++)
      snprintf(hex + 2 * i, 3, "%02x", ((const unsigned char *)values)[i]);
   hex[2 * n] = 0;
   emit("push", "\"cb\":%" PRIu64 ",\"offset\":%u,\"data\":\"%s\"", H(cb), offset, hex);
   NEXT(cb, CmdPushConstants)(cb, layout, stages, offset, size, values);
}

static VKAPI_ATTR VkResult VKAPI_CALL
SetDebugUtilsObjectNameEXT(VkDevice device, const VkDebugUtilsObjectNameInfoEXT *info)
{
   char name[512];
   json_string(name, sizeof(name), info->pObjectName);
   emit("name", "\"type\":%d,\"handle\":%" PRIu64 ",\"name\":\"%s\"", info->objectType,
        info->objectHandle, name);
   struct device_entry *d = device_of(device);
   /* Reached through vkGetInstanceProcAddr, the next layer may lack it. */
   return d->SetDebugUtilsObjectNameEXT ? d->SetDebugUtilsObjectNameEXT(device, info)
                                        : VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL
BeginCommandBuffer(VkCommandBuffer cb, const VkCommandBufferBeginInfo *info)
{
   emit("begin", "\"cb\":%" PRIu64, H(cb));
   return NEXT(cb, BeginCommandBuffer)(cb, info);
}

static VKAPI_ATTR void VKAPI_CALL
CmdBindPipeline(VkCommandBuffer cb, VkPipelineBindPoint point, VkPipeline pipeline)
{
   if (point == VK_PIPELINE_BIND_POINT_COMPUTE)
      emit("pipeline", "\"cb\":%" PRIu64 ",\"pipeline\":%" PRIu64, H(cb), H(pipeline));
   NEXT(cb, CmdBindPipeline)(cb, point, pipeline);
}

static VKAPI_ATTR void VKAPI_CALL
CmdBindDescriptorSets(VkCommandBuffer cb, VkPipelineBindPoint point, VkPipelineLayout layout,
                      uint32_t first, uint32_t count, const VkDescriptorSet *sets,
                      uint32_t ndynamic, const uint32_t *dynamic)
{
   if (point == VK_PIPELINE_BIND_POINT_COMPUTE) {
      for (uint32_t i = 0; i < count; i++)
         emit("sets", "\"cb\":%" PRIu64 ",\"index\":%u,\"set\":%" PRIu64 ",\"dynamic\":%u",
              H(cb), first + i, H(sets[i]), ndynamic);
   }
   NEXT(cb, CmdBindDescriptorSets)(cb, point, layout, first, count, sets, ndynamic,
                                        dynamic);
}

static VKAPI_ATTR void VKAPI_CALL
CmdBeginDebugUtilsLabelEXT(VkCommandBuffer cb, const VkDebugUtilsLabelEXT *label)
{
   char name[512];
   json_string(name, sizeof(name), label->pLabelName);
   emit("label", "\"cb\":%" PRIu64 ",\"name\":\"%s\"", H(cb), name);
   if (device_of(cb)->CmdBeginDebugUtilsLabelEXT)
      device_of(cb)->CmdBeginDebugUtilsLabelEXT(cb, label);
}

static VKAPI_ATTR void VKAPI_CALL
CmdEndDebugUtilsLabelEXT(VkCommandBuffer cb)
{
   emit("end_label", "\"cb\":%" PRIu64, H(cb));
   if (device_of(cb)->CmdEndDebugUtilsLabelEXT)
      device_of(cb)->CmdEndDebugUtilsLabelEXT(cb);
}

static VKAPI_ATTR void VKAPI_CALL
CmdDispatch(VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z)
{
   emit("dispatch", "\"cb\":%" PRIu64 ",\"groups\":[%u,%u,%u]", H(cb), x, y, z);
   NEXT(cb, CmdDispatch)(cb, x, y, z);
}

static VKAPI_ATTR void VKAPI_CALL
CmdDispatchBase(VkCommandBuffer cb, uint32_t bx, uint32_t by, uint32_t bz, uint32_t x,
                uint32_t y, uint32_t z)
{
   emit("dispatch", "\"cb\":%" PRIu64 ",\"groups\":[%u,%u,%u]", H(cb), x, y, z);
   NEXT(cb, CmdDispatchBase)(cb, bx, by, bz, x, y, z);
}

static VKAPI_ATTR void VKAPI_CALL
CmdDispatchIndirect(VkCommandBuffer cb, VkBuffer buffer, VkDeviceSize offset)
{
   emit("dispatch", "\"cb\":%" PRIu64 ",\"indirect\":%" PRIu64, H(cb), H(buffer));
   NEXT(cb, CmdDispatchIndirect)(cb, buffer, offset);
}

static VKAPI_ATTR void VKAPI_CALL
CmdPipelineBarrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkPipelineStageFlags dst,
                   VkDependencyFlags flags, uint32_t nmem, const VkMemoryBarrier *mem,
                   uint32_t nbuf, const VkBufferMemoryBarrier *buf, uint32_t nimg,
                   const VkImageMemoryBarrier *img)
{
   emit("barrier", "\"cb\":%" PRIu64 ",\"src_stages\":%u,\"dst_stages\":%u", H(cb), src, dst);
   NEXT(cb, CmdPipelineBarrier)(cb, src, dst, flags, nmem, mem, nbuf, buf, nimg, img);
}

static VKAPI_ATTR void VKAPI_CALL
CmdPipelineBarrier2(VkCommandBuffer cb, const VkDependencyInfo *dep)
{
   emit("barrier", "\"cb\":%" PRIu64 ",\"sync2\":true", H(cb));
   NEXT(cb, CmdPipelineBarrier2)(cb, dep);
}

static VKAPI_ATTR void VKAPI_CALL
CmdCopyBuffer(VkCommandBuffer cb, VkBuffer src, VkBuffer dst, uint32_t n,
              const VkBufferCopy *regions)
{
   for (uint32_t i = 0; i < n; i++)
      emit("copy_cmd",
           "\"cb\":%" PRIu64 ",\"src\":%" PRIu64 ",\"src_offset\":%" PRIu64
           ",\"dst\":%" PRIu64 ",\"dst_offset\":%" PRIu64 ",\"size\":%" PRIu64,
           H(cb), H(src), regions[i].srcOffset, H(dst), regions[i].dstOffset,
           regions[i].size);
   NEXT(cb, CmdCopyBuffer)(cb, src, dst, n, regions);
}

static VKAPI_ATTR void VKAPI_CALL
CmdFillBuffer(VkCommandBuffer cb, VkBuffer dst, VkDeviceSize offset, VkDeviceSize size,
              uint32_t data)
{
   emit("copy_cmd",
        "\"cb\":%" PRIu64 ",\"dst\":%" PRIu64 ",\"dst_offset\":%" PRIu64 ",\"size\":%" PRIu64,
        H(cb), H(dst), offset, size);
   NEXT(cb, CmdFillBuffer)(cb, dst, offset, size, data);
}

static VKAPI_ATTR void VKAPI_CALL
DestroyDevice(VkDevice device, const VkAllocationCallbacks *alloc)
{
   if (!device)
      return;
   struct device_entry *d = device_of(device);
   PFN_vkDestroyDevice next = d->DestroyDevice;
   pthread_mutex_lock(&lock);
   memset(d, 0, sizeof(*d));
   pthread_mutex_unlock(&lock);
   next(device, alloc);
}

static VKAPI_ATTR void VKAPI_CALL
DestroyInstance(VkInstance instance, const VkAllocationCallbacks *alloc)
{
   if (!instance)
      return;
   struct instance_entry *in = instance_of(instance);
   if (!in)
      return;
   PFN_vkDestroyInstance next = in->DestroyInstance;
   pthread_mutex_lock(&lock);
   memset(in, 0, sizeof(*in));
   pthread_mutex_unlock(&lock);
   next(instance, alloc);
}

static VKAPI_ATTR VkResult VKAPI_CALL
CreateInstance(const VkInstanceCreateInfo *info, const VkAllocationCallbacks *alloc,
               VkInstance *instance)
{
   VkLayerInstanceCreateInfo *chain = (VkLayerInstanceCreateInfo *)info->pNext;
   while (chain && !(chain->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                     chain->function == VK_LAYER_LINK_INFO))
      chain = (VkLayerInstanceCreateInfo *)chain->pNext;
   if (!chain)
      return VK_ERROR_INITIALIZATION_FAILED;

   PFN_vkGetInstanceProcAddr gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
   chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
   PFN_vkCreateInstance next = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
   VkResult r = next(info, alloc, instance);
   if (r != VK_SUCCESS)
      return r;

   pthread_mutex_lock(&lock);
   if (!out) {
      /* "stdout" interleaves the events with the validation layer's
       * messages, which it prints during the call they are about. */
      const char *path = getenv("MESA_FORK_SYNCTRACE");
      out = !path ? NULL : !strcmp(path, "stdout") ? stdout : fopen(path, "w");
      if (path && !out)
         fprintf(stderr, "VK_LAYER_MESAFORK_synctrace: cannot write %s\n", path);
      if (!path)
         fprintf(stderr, "VK_LAYER_MESAFORK_synctrace: MESA_FORK_SYNCTRACE is not set; "
                         "tracing nothing\n");
   }
   int i = 0;
   while (i < MAX_OBJECTS && instances[i].key)
      i++;
   if (i < MAX_OBJECTS) {
      instances[i] = (struct instance_entry){
         key_of(*instance), gipa,
         (PFN_vkDestroyInstance)gipa(*instance, "vkDestroyInstance")};
   }
   pthread_mutex_unlock(&lock);
   if (i == MAX_OBJECTS) {
      fprintf(stderr, "VK_LAYER_MESAFORK_synctrace: more than %d instances\n", MAX_OBJECTS);
      ((PFN_vkDestroyInstance)gipa(*instance, "vkDestroyInstance"))(*instance, alloc);
      return VK_ERROR_INITIALIZATION_FAILED;
   }
   return VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL
CreateDevice(VkPhysicalDevice pdev, const VkDeviceCreateInfo *info,
             const VkAllocationCallbacks *alloc, VkDevice *device)
{
   VkLayerDeviceCreateInfo *chain = (VkLayerDeviceCreateInfo *)info->pNext;
   while (chain && !(chain->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO &&
                     chain->function == VK_LAYER_LINK_INFO))
      chain = (VkLayerDeviceCreateInfo *)chain->pNext;
   if (!chain)
      return VK_ERROR_INITIALIZATION_FAILED;

   PFN_vkGetInstanceProcAddr gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
   PFN_vkGetDeviceProcAddr gdpa = chain->u.pLayerInfo->pfnNextGetDeviceProcAddr;
   chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
   PFN_vkCreateDevice next = (PFN_vkCreateDevice)gipa(NULL, "vkCreateDevice");
   VkResult r = next(pdev, info, alloc, device);
   if (r != VK_SUCCESS)
      return r;

   struct device_entry d = {.key = key_of(*device), .gdpa = gdpa};
#define GET(name) d.name = (PFN_vk##name)gdpa(*device, "vk" #name)
   GET(DestroyDevice);
   GET(CreateBuffer);
   GET(AllocateMemory);
   GET(UpdateDescriptorSets);
   GET(CreateDescriptorSetLayout);
   GET(AllocateDescriptorSets);
   GET(CmdPushConstants);
   GET(SetDebugUtilsObjectNameEXT);
   GET(BeginCommandBuffer);
   GET(CmdBindPipeline);
   GET(CmdBindDescriptorSets);
   GET(CmdBeginDebugUtilsLabelEXT);
   GET(CmdEndDebugUtilsLabelEXT);
   GET(CmdDispatch);
   GET(CmdDispatchBase);
   GET(CmdDispatchIndirect);
   GET(CmdPipelineBarrier);
   GET(CmdPipelineBarrier2);
   GET(CmdCopyBuffer);
   GET(CmdFillBuffer);
#undef GET
   pthread_mutex_lock(&lock);
   int i = 0;
   while (i < MAX_OBJECTS && devices[i].key)
      i++;
   if (i < MAX_OBJECTS)
      devices[i] = d;
   pthread_mutex_unlock(&lock);
   if (i == MAX_OBJECTS) {
      fprintf(stderr, "VK_LAYER_MESAFORK_synctrace: more than %d devices\n", MAX_OBJECTS);
      d.DestroyDevice(*device, alloc);
      return VK_ERROR_INITIALIZATION_FAILED;
   }
   return VK_SUCCESS;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL
vkGetDeviceProcAddr(VkDevice device, const char *name);

static const struct {
   const char *name;
   PFN_vkVoidFunction ours;
   size_t next;
} traced[] = {
#define ENTRY(n) {"vk" #n, (PFN_vkVoidFunction)n, offsetof(struct device_entry, n)}
   ENTRY(CreateBuffer),
   ENTRY(AllocateMemory),
   ENTRY(UpdateDescriptorSets),
   ENTRY(CreateDescriptorSetLayout),
   ENTRY(AllocateDescriptorSets),
   ENTRY(CmdPushConstants),
   ENTRY(SetDebugUtilsObjectNameEXT),
   ENTRY(BeginCommandBuffer),
   ENTRY(CmdBindPipeline),
   ENTRY(CmdBindDescriptorSets),
   ENTRY(CmdBeginDebugUtilsLabelEXT),
   ENTRY(CmdEndDebugUtilsLabelEXT),
   ENTRY(CmdDispatch),
   ENTRY(CmdDispatchBase),
   ENTRY(CmdDispatchIndirect),
   ENTRY(CmdPipelineBarrier),
   ENTRY(CmdPipelineBarrier2),
   ENTRY(CmdCopyBuffer),
   ENTRY(CmdFillBuffer),
#undef ENTRY
};

static int
traced_index(const char *name)
{
   for (size_t i = 0; i < sizeof(traced) / sizeof(traced[0]); i++) {
      if (!strcmp(name, traced[i].name))
         return i;
   }
   return -1;
}

/* Ours when we trace the call and the next layer has it, else the next's. */
static PFN_vkVoidFunction
device_proc(struct device_entry *d, VkDevice device, const char *name)
{
   if (!strcmp(name, "vkGetDeviceProcAddr"))
      return (PFN_vkVoidFunction)vkGetDeviceProcAddr;
   if (!strcmp(name, "vkDestroyDevice"))
      return (PFN_vkVoidFunction)DestroyDevice;
   int i = traced_index(name);
   if (i >= 0) {
      void *next = *(void **)((char *)d + traced[i].next);
      return next ? traced[i].ours : NULL;
   }
   return d->gdpa(device, name);
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL
vkGetDeviceProcAddr(VkDevice device, const char *name)
{
   struct device_entry *d = find_device(device);
   return d ? device_proc(d, device, name) : NULL;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL
vkGetInstanceProcAddr(VkInstance instance, const char *name)
{
   if (!strcmp(name, "vkGetInstanceProcAddr"))
      return (PFN_vkVoidFunction)vkGetInstanceProcAddr;
   if (!strcmp(name, "vkCreateInstance"))
      return (PFN_vkVoidFunction)CreateInstance;
   if (!strcmp(name, "vkCreateDevice"))
      return (PFN_vkVoidFunction)CreateDevice;
   if (!strcmp(name, "vkDestroyInstance"))
      return (PFN_vkVoidFunction)DestroyInstance;
   if (!strcmp(name, "vkDestroyDevice"))
      return (PFN_vkVoidFunction)DestroyDevice;
   if (!strcmp(name, "vkGetDeviceProcAddr"))
      return (PFN_vkVoidFunction)vkGetDeviceProcAddr;
   if (!instance)
      return NULL;
   struct instance_entry *in = instance_of(instance);
   if (!in)
      return NULL;
   /* The loader and applications may take device commands here too (the
    * debug-utils ones usually are); ours when the chain has them. */
   PFN_vkVoidFunction next = in->gipa(instance, name);
   int i = traced_index(name);
   return next && i >= 0 ? traced[i].ours : next;
}
