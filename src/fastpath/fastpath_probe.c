/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * mesa-fork-fastpath-probe: which of llama.cpp's fast paths a Vulkan device
 * gives, and whether they compute what they should.
 *
 *   mesa-fork-fastpath-probe [--compute] [--validate] [--device N]
 *   mesa-fork-fastpath-probe --self-test
 *
 * Prints one JSON line describing the device: the features, extensions and
 * properties ggml-vulkan decides its paths on, the float-controls
 * properties, the subgroup-size control, and under "ggml" the "fp16" and
 * "int dot" that ggml-vulkan's device line will show:
 *
 *   fp16    = VK_KHR_16bit_storage and VK_KHR_shader_float16_int8 are
 *             present and shaderFloat16 is set
 *   int dot = VK_KHR_shader_integer_dot_product is present,
 *             shaderIntegerDotProduct is set and
 *             integerDotProduct4x8BitPackedSignedAccelerated is true
 *
 * With --compute, one JSON line per check follows:
 *   "fp16"     16-bit float multiply-add, vec2 multiply, ldexp and
 *              2x16 pack/unpack (fp16.comp), where shaderFloat16 is set
 *   "int_dot"  SDot, UDot, SDotAccSat and UDotAccSat on packed 4x8-bit
 *              words (dot.spvasm), where shaderIntegerDotProduct is set;
 *              the inputs include -128 lanes and accumulators at the
 *              edges of the 32-bit range, so that sign extension and
 *              saturation are exercised
 *   "ssbo_vec4"  four neighbouring 32-bit storage-buffer loads at a
 *              16-byte aligned word (ssbo.comp), the run panvk merges into
 *              one 128-bit load; "ssbo_vec4_offset" the same with the
 *              buffer bound minStorageBufferOffsetAlignment bytes into its
 *              memory (4 on panvk: the merged loads' addresses are then
 *              4 mod 16), where that is not a multiple of 16;
 *              "ssbo_vec4_pipeline_robust" the first with its pipeline
 *              asking for robust storage buffers (VK_EXT_pipeline_
 *              robustness), and "ssbo_vec4_robust" the first on a second
 *              device with robustBufferAccess enabled: panvk merges in
 *              neither (run where the device supports them)
 *   "required_subgroup_size"  a compute pipeline created with the device's
 *              maxSubgroupSize as its required size, where the device
 *              lists the compute stage in requiredSubgroupSizeStages, and
 *              always with --validate, so that the layer can say whether
 *              the request was allowed
 * Each GPU result is compared with the CPU's: "compared" and "wrong"
 * count words. On a drm-shim nothing executes, so only "ran" means
 * something there; on hardware "wrong" must be 0.
 *
 * --self-test checks the CPU references against values worked out by
 * hand and that the comparison counts a wrong word, without a device.
 *
 * Exit status: 0 when every check that ran matched (or, on --self-test,
 * when the references are right); 1 when a result differed; 2 on a Vulkan
 * failure; 64 on bad arguments.
 */

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_vk.h"

#include "dot_spv.h"
#include "fill_spv.h"
#include "fp16_spv.h"
#include "ssbo_spv.h"

#define LANES 64
#define OUT_BASE 256
#define WORDS 1024

/* ---- CPU references ---------------------------------------------------- */

static int32_t
ref_sdot(uint32_t a, uint32_t b)
{
   int32_t sum = 0;
   for (unsigned k = 0; k < 4; ++k)
      sum += (int32_t)(int8_t)(a >> (8 * k)) * (int32_t)(int8_t)(b >> (8 * k));
   return sum;
}

static uint32_t
ref_udot(uint32_t a, uint32_t b)
{
   uint32_t sum = 0;
   for (unsigned k = 0; k < 4; ++k)
      sum += ((a >> (8 * k)) & 0xff) * ((b >> (8 * k)) & 0xff);
   return sum;
}

static int32_t
ref_sdot_acc_sat(uint32_t a, uint32_t b, int32_t acc)
{
   int64_t sum = (int64_t)ref_sdot(a, b) + acc;
   return sum > INT32_MAX ? INT32_MAX : sum < INT32_MIN ? INT32_MIN : (int32_t)sum;
}

static uint32_t
ref_udot_acc_sat(uint32_t a, uint32_t b, uint32_t acc)
{
   uint64_t sum = (uint64_t)ref_udot(a, b) + acc;
   return sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
}

/* IEEE binary16 of a float that binary16 holds exactly (the probe's inputs
 * and results are chosen so), and back.
 */
static uint16_t
to_half(float f)
{
   if (f == 0.0f)
      return signbit(f) ? 0x8000 : 0;
   uint16_t sign = f < 0 ? 0x8000 : 0;
   int e;
   float m = frexpf(fabsf(f), &e); /* f = m * 2^e, m in [0.5, 1) */
   int exp = e - 1 + 15;
   if (exp <= 0) /* subnormal: 2^-14 * mant / 1024 */
      return sign | (uint16_t)lroundf(fabsf(f) * 16777216.0f);
   return sign | (uint16_t)(exp << 10) | (uint16_t)lroundf((m * 2.0f - 1.0f) * 1024.0f);
}

static float
from_half(uint16_t h)
{
   float sign = (h & 0x8000) ? -1.0f : 1.0f;
   int exp = (h >> 10) & 0x1f;
   int mant = h & 0x3ff;
   if (exp == 0)
      return sign * ldexpf((float)mant, -24);
   if (exp == 31)
      return mant ? NAN : sign * INFINITY;
   return sign * ldexpf(1.0f + mant / 1024.0f, exp - 15);
}

/* Words that differ between got and want. */
static unsigned
count_wrong(const uint32_t *got, const uint32_t *want, unsigned n)
{
   unsigned wrong = 0;
   for (unsigned i = 0; i < n; ++i)
      wrong += got[i] != want[i];
   return wrong;
}

/* ---- inputs and expected outputs --------------------------------------- */

static uint32_t
next(uint32_t *state)
{
   *state = *state * 1664525u + 1013904223u;
   return *state;
}

static void
dot_inputs(uint32_t *v, uint32_t *want)
{
   uint32_t s = 12345;
   for (unsigned i = 0; i < LANES; ++i) {
      uint32_t a = next(&s), b = next(&s), acc = next(&s);
      switch (i % 8) {
      case 0: a = b = 0x80808080u; break;            /* -128 lanes */
      case 1: acc = 0x7fffff00u; a = b = 0x7f7f7f7fu; break; /* signed max */
      case 2: acc = 0x80000100u; a = 0x80808080u; b = 0x7f7f7f7fu; break;
      case 3: acc = 0xffffff00u; a = b = 0xffffffffu; break; /* unsigned max */
      default: break;
      }
      v[i] = a;
      v[64 + i] = b;
      v[128 + i] = acc;
      want[4 * i + 0] = (uint32_t)ref_sdot(a, b);
      want[4 * i + 1] = ref_udot(a, b);
      want[4 * i + 2] = (uint32_t)ref_sdot_acc_sat(a, b, (int32_t)acc);
      want[4 * i + 3] = ref_udot_acc_sat(a, b, acc);
   }
}

static void
fp16_inputs(uint32_t *v, uint32_t *want)
{
   uint32_t s = 777;
   for (unsigned i = 0; i < LANES; ++i) {
      /* Halves in [-8, 8): every product, sum and scaling below is exact
       * in binary16.
       */
      float x = ((int)(next(&s) >> 24) % 32 - 16) * 0.5f;
      float y = ((int)(next(&s) >> 24) % 32 - 16) * 0.5f;
      float z = ((int)(next(&s) >> 24) % 32 - 16) * 0.5f;
      int e = (int)(next(&s) >> 24) % 9 - 4;
      v[i] = to_half(x) | (uint32_t)to_half(y) << 16;
      v[64 + i] = to_half(z);
      v[128 + i] = (uint32_t)e;
      want[2 * i] = to_half(x * y + z) | (uint32_t)to_half(ldexpf(x, e)) << 16;
      want[2 * i + 1] = to_half(x * z) | (uint32_t)to_half(y * x) << 16;
   }
}

static void
ssbo_inputs(uint32_t *v, uint32_t *want)
{
   uint32_t s = 4242;
   for (unsigned i = 0; i < 4 * LANES; ++i)
      v[i] = next(&s);
   for (unsigned i = 0; i < LANES; ++i)
      want[i] = v[4 * i] + 3u * v[4 * i + 1] + 5u * v[4 * i + 2] + 7u * v[4 * i + 3];
}

static int
self_test(void)
{
   struct {
      const char *what;
      int64_t got, want;
   } c[] = {
      {"sdot of -128 lanes", ref_sdot(0x80808080u, 0x80808080u), 4 * 16384},
      {"sdot signs per lane", ref_sdot(0x01ff02feu, 0x03030303u), 0},
      {"sdot mixed", ref_sdot(0x0000ff02u, 0x00000503u), 6 - 5},
      {"udot of 255 lanes", ref_udot(0xffffffffu, 0xffffffffu), 4 * 65025},
      {"udot is not sdot", ref_udot(0x000000ffu, 0x00000002u), 510},
      {"sdot saturates up", ref_sdot_acc_sat(0x7f7f7f7fu, 0x7f7f7f7fu, INT32_MAX - 10), INT32_MAX},
      {"sdot saturates down", ref_sdot_acc_sat(0x80808080u, 0x7f7f7f7fu, INT32_MIN + 10), INT32_MIN},
      {"sdot accumulates", ref_sdot_acc_sat(0x00000002u, 0x00000003u, -7), -1},
      {"udot saturates", ref_udot_acc_sat(0xffffffffu, 0xffffffffu, 0xfffffff0u), UINT32_MAX},
      {"udot accumulates", ref_udot_acc_sat(0x00000002u, 0x00000003u, 7), 13},
      {"half 1.0", to_half(1.0f), 0x3c00},
      {"half -2.0", to_half(-2.0f), 0xc000},
      {"half 0.5", to_half(0.5f), 0x3800},
      {"half -0.0", to_half(-0.0f), 0x8000},
      {"half 96.25", to_half(96.25f), 0x5604},
      {"half subnormal 2^-24", to_half(ldexpf(1.0f, -24)), 0x0001},
      {"from half 0xc500", (int64_t)(from_half(0xc500) * 4), -20},
   };
   unsigned failed = 0;
   for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); ++i) {
      if (c[i].got != c[i].want) {
         printf("self-test: %s: got %" PRId64 ", want %" PRId64 "\n", c[i].what, c[i].got,
                c[i].want);
         failed++;
      }
   }
   uint32_t want[4 * LANES], got[4 * LANES], v[WORDS] = {0};
   dot_inputs(v, want);
   memcpy(got, want, sizeof(got));
   got[4 * 9 + 2] ^= 1;
   if (count_wrong(got, want, 4 * LANES) != 1) {
      printf("self-test: the comparison missed a wrong word\n");
      failed++;
   }
   printf("self-test: %s\n", failed ? "FAILED" : "ok");
   return failed ? 1 : 0;
}

/* ---- the device -------------------------------------------------------- */

struct caps {
   VkPhysicalDeviceProperties props;
   VkPhysicalDeviceDriverProperties drv;
   VkPhysicalDeviceShaderFloat16Int8Features f16i8;
   VkPhysicalDevice16BitStorageFeatures s16;
   VkPhysicalDeviceShaderIntegerDotProductFeatures idp;
   VkPhysicalDeviceSubgroupSizeControlFeatures ssc;
   VkPhysicalDeviceShaderIntegerDotProductProperties idp_props;
   VkPhysicalDeviceFloatControlsProperties fc;
   VkPhysicalDeviceSubgroupSizeControlProperties ssc_props;
   VkPhysicalDevicePipelineRobustnessPropertiesEXT robustness;
   VkPhysicalDevicePipelineRobustnessFeaturesEXT pr;
   bool ext_16bit_storage, ext_float16_int8, ext_int_dot, ext_ssc;
   bool ext_pipeline_robustness, robust_buffer_access;
};

static bool
has_ext(VkExtensionProperties *exts, uint32_t n, const char *name)
{
   for (uint32_t i = 0; i < n; ++i) {
      if (!strcmp(exts[i].extensionName, name))
         return true;
   }
   return false;
}

static void
query(VkPhysicalDevice pd, struct caps *c)
{
   memset(c, 0, sizeof(*c));
   mf_get_driver_properties(pd, &c->props, &c->drv);

   uint32_t n = 0;
   MF_CHECK(vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL));
   VkExtensionProperties *exts = calloc(n ? n : 1, sizeof(*exts));
   MF_CHECK(vkEnumerateDeviceExtensionProperties(pd, NULL, &n, exts));
   c->ext_16bit_storage = has_ext(exts, n, VK_KHR_16BIT_STORAGE_EXTENSION_NAME);
   c->ext_float16_int8 = has_ext(exts, n, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
   c->ext_int_dot = has_ext(exts, n, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
   c->ext_ssc = has_ext(exts, n, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
   c->ext_pipeline_robustness = has_ext(exts, n, VK_EXT_PIPELINE_ROBUSTNESS_EXTENSION_NAME);
   free(exts);

   c->f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
   c->s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
   c->s16.pNext = &c->f16i8;
   c->idp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
   c->idp.pNext = &c->s16;
   c->ssc.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
   c->ssc.pNext = &c->idp;
   c->pr.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_FEATURES_EXT;
   c->pr.pNext = &c->ssc;
   VkPhysicalDeviceFeatures2 f2 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
      .pNext = c->ext_pipeline_robustness ? (void *)&c->pr : &c->ssc,
   };
   vkGetPhysicalDeviceFeatures2(pd, &f2);
   c->robust_buffer_access = f2.features.robustBufferAccess;

   c->idp_props.sType =
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES;
   c->fc.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES;
   c->fc.pNext = &c->idp_props;
   c->ssc_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
   c->ssc_props.pNext = &c->fc;
   c->robustness.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_PROPERTIES_EXT;
   c->robustness.pNext = &c->ssc_props;
   VkPhysicalDeviceProperties2 p2 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
      .pNext = c->ext_pipeline_robustness ? (void *)&c->robustness : &c->ssc_props,
   };
   vkGetPhysicalDeviceProperties2(pd, &p2);
}

static bool
ggml_fp16(const struct caps *c)
{
   return c->ext_16bit_storage && c->ext_float16_int8 && c->f16i8.shaderFloat16;
}

static bool
ggml_int_dot(const struct caps *c)
{
   return c->ext_int_dot && c->idp.shaderIntegerDotProduct &&
          c->idp_props.integerDotProduct4x8BitPackedSignedAccelerated;
}

static const char *
independence(VkShaderFloatControlsIndependence i)
{
   switch (i) {
   case VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_32_BIT_ONLY: return "32_bit_only";
   case VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_ALL: return "all";
   case VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_NONE: return "none";
   default: return "?";
   }
}

#define B(x) ((x) ? "true" : "false")

static const char *
buffer_behavior(VkPipelineRobustnessBufferBehaviorEXT b)
{
   switch (b) {
   case VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT: return "device_default";
   case VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT: return "disabled";
   case VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_ROBUST_BUFFER_ACCESS_EXT:
      return "robust_buffer_access";
   case VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_ROBUST_BUFFER_ACCESS_2_EXT:
      return "robust_buffer_access_2";
   default: return "unknown";
   }
}

static void
print_caps(const struct caps *c)
{
   const VkPhysicalDeviceShaderIntegerDotProductProperties *d = &c->idp_props;
   const VkPhysicalDeviceFloatControlsProperties *f = &c->fc;
   printf("{\"device\": \"%s\", \"driver\": \"%s\", \"info\": \"%s\", "
          "\"api\": \"%u.%u\", ",
          c->props.deviceName, c->drv.driverName, c->drv.driverInfo,
          VK_API_VERSION_MAJOR(c->props.apiVersion),
          VK_API_VERSION_MINOR(c->props.apiVersion));
   printf("\"extensions\": {\"VK_KHR_16bit_storage\": %s, "
          "\"VK_KHR_shader_float16_int8\": %s, "
          "\"VK_KHR_shader_integer_dot_product\": %s, "
          "\"VK_EXT_subgroup_size_control\": %s}, ",
          B(c->ext_16bit_storage), B(c->ext_float16_int8), B(c->ext_int_dot),
          B(c->ext_ssc));
   printf("\"features\": {\"shaderFloat16\": %s, \"shaderInt8\": %s, "
          "\"storageBuffer16BitAccess\": %s, \"shaderIntegerDotProduct\": %s, "
          "\"subgroupSizeControl\": %s, \"computeFullSubgroups\": %s}, ",
          B(c->f16i8.shaderFloat16), B(c->f16i8.shaderInt8),
          B(c->s16.storageBuffer16BitAccess), B(c->idp.shaderIntegerDotProduct),
          B(c->ssc.subgroupSizeControl), B(c->ssc.computeFullSubgroups));
   printf("\"integer_dot_accelerated\": {\"8bit_unsigned\": %s, \"8bit_signed\": %s, "
          "\"8bit_mixed\": %s, \"4x8_packed_unsigned\": %s, \"4x8_packed_signed\": %s, "
          "\"4x8_packed_mixed\": %s, \"sat_8bit_unsigned\": %s, \"sat_8bit_signed\": %s, "
          "\"sat_8bit_mixed\": %s, \"sat_4x8_packed_unsigned\": %s, "
          "\"sat_4x8_packed_signed\": %s, \"sat_4x8_packed_mixed\": %s, "
          "\"16bit_signed\": %s, \"32bit_signed\": %s}, ",
          B(d->integerDotProduct8BitUnsignedAccelerated),
          B(d->integerDotProduct8BitSignedAccelerated),
          B(d->integerDotProduct8BitMixedSignednessAccelerated),
          B(d->integerDotProduct4x8BitPackedUnsignedAccelerated),
          B(d->integerDotProduct4x8BitPackedSignedAccelerated),
          B(d->integerDotProduct4x8BitPackedMixedSignednessAccelerated),
          B(d->integerDotProductAccumulatingSaturating8BitUnsignedAccelerated),
          B(d->integerDotProductAccumulatingSaturating8BitSignedAccelerated),
          B(d->integerDotProductAccumulatingSaturating8BitMixedSignednessAccelerated),
          B(d->integerDotProductAccumulatingSaturating4x8BitPackedUnsignedAccelerated),
          B(d->integerDotProductAccumulatingSaturating4x8BitPackedSignedAccelerated),
          B(d->integerDotProductAccumulatingSaturating4x8BitPackedMixedSignednessAccelerated),
          B(d->integerDotProduct16BitSignedAccelerated),
          B(d->integerDotProduct32BitSignedAccelerated));
   printf("\"float_controls\": {\"denorm_independence\": \"%s\", "
          "\"rounding_independence\": \"%s\", \"denorm_preserve16\": %s, "
          "\"denorm_preserve32\": %s, \"denorm_ftz16\": %s, \"denorm_ftz32\": %s, "
          "\"rte16\": %s, \"rte32\": %s, \"rtz16\": %s, \"rtz32\": %s}, ",
          independence(f->denormBehaviorIndependence),
          independence(f->roundingModeIndependence),
          B(f->shaderDenormPreserveFloat16), B(f->shaderDenormPreserveFloat32),
          B(f->shaderDenormFlushToZeroFloat16), B(f->shaderDenormFlushToZeroFloat32),
          B(f->shaderRoundingModeRTEFloat16), B(f->shaderRoundingModeRTEFloat32),
          B(f->shaderRoundingModeRTZFloat16), B(f->shaderRoundingModeRTZFloat32));
   printf("\"subgroup\": {\"min\": %u, \"max\": %u, \"required_stages_compute\": %s}, ",
          c->ssc_props.minSubgroupSize, c->ssc_props.maxSubgroupSize,
          B(c->ssc_props.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT));
   /* Pipeline caches are taken only where this matches: the fork's panvk
    * changes it with the switches that change what its compiler makes
    */
   printf("\"pipeline_cache_uuid\": \"");
   for (unsigned i = 0; i < VK_UUID_SIZE; ++i)
      printf("%02x", c->props.pipelineCacheUUID[i]);
   printf("\", ");
   /* What a pipeline that asks for no robustness gets (panvk: merged
    * storage-buffer loads, so none)
    */
   if (c->ext_pipeline_robustness)
      printf("\"default_robustness_storage_buffers\": \"%s\", ",
             buffer_behavior(c->robustness.defaultRobustnessStorageBuffers));
   printf("\"ggml\": {\"fp16\": %d, \"int_dot\": %d}}\n", ggml_fp16(c), ggml_int_dot(c));
}

static void
create_device(struct mf_device *d, VkPhysicalDevice pd, const struct caps *c)
{
   const char *exts[5];
   uint32_t n = 0;
   if (c->ext_16bit_storage)
      exts[n++] = VK_KHR_16BIT_STORAGE_EXTENSION_NAME;
   if (c->ext_float16_int8)
      exts[n++] = VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME;
   if (c->ext_int_dot)
      exts[n++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
   if (c->ext_ssc)
      exts[n++] = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
   if (c->ext_pipeline_robustness)
      exts[n++] = VK_EXT_PIPELINE_ROBUSTNESS_EXTENSION_NAME;

   /* Enable what is supported of what the checks use. */
   VkPhysicalDeviceShaderFloat16Int8Features f16i8 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
      .shaderFloat16 = c->ext_float16_int8 && c->f16i8.shaderFloat16,
   };
   VkPhysicalDeviceShaderIntegerDotProductFeatures idp = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
      .pNext = c->ext_float16_int8 ? &f16i8 : NULL,
      .shaderIntegerDotProduct = c->ext_int_dot && c->idp.shaderIntegerDotProduct,
   };
   VkPhysicalDeviceSubgroupSizeControlFeatures ssc = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
      .pNext = c->ext_int_dot ? (void *)&idp : idp.pNext,
      .subgroupSizeControl = c->ext_ssc && c->ssc.subgroupSizeControl,
   };
   VkPhysicalDevicePipelineRobustnessFeaturesEXT pr = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_FEATURES_EXT,
      .pNext = c->ext_ssc ? (void *)&ssc : ssc.pNext,
      .pipelineRobustness = c->ext_pipeline_robustness && c->pr.pipelineRobustness,
   };
   void *chain = c->ext_pipeline_robustness ? (void *)&pr : pr.pNext;

   mf_device_create_ext(d, pd, 0, NULL, chain, exts, n);
}

/* Runs spv over one workgroup of LANES invocations on the words in v and
 * compares words OUT_BASE.. with want; the storage buffer is bound
 * bind_bytes (a multiple of 4) into its memory.
 */
static unsigned
run_check_at(struct mf_device *d, const char *name, const uint32_t *spv, size_t spv_size,
             const uint32_t *v, const uint32_t *want, unsigned nwant, unsigned bind_bytes,
             bool robust_pipeline)
{
   struct mf_buffer buf;
   mf_buffer_create(d, WORDS * 4 + bind_bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1,
                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                    &buf);
   uint32_t *map;
   MF_CHECK(vkMapMemory(d->dev, buf.mem, 0, VK_WHOLE_SIZE, 0, (void **)&map));
   map += bind_bytes / 4;
   memcpy(map, v, WORDS * 4);

   struct mf_compute c;
   mf_compute_create(d, spv, spv_size, 0, buf.buf, NULL, 0, &c);
   if (robust_pipeline) {
      /* The same shader again, its storage buffers asking for robust
       * buffer access through VK_EXT_pipeline_robustness
       */
      VkPipelineRobustnessCreateInfoEXT rob = {
         .sType = VK_STRUCTURE_TYPE_PIPELINE_ROBUSTNESS_CREATE_INFO_EXT,
         .storageBuffers = VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_ROBUST_BUFFER_ACCESS_EXT,
         .uniformBuffers = VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT,
         .vertexInputs = VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT,
         .images = VK_PIPELINE_ROBUSTNESS_IMAGE_BEHAVIOR_DEVICE_DEFAULT_EXT,
      };
      vkDestroyPipeline(d->dev, c.pipe, NULL);
      c.pipe = mf_compute_pipeline_ext(d, &c, spv, spv_size, NULL, 0, &rob);
   }
   if (bind_bytes)
      mf_compute_set_storage(d, &c, buf.buf, bind_bytes, WORDS * 4);
   VkCommandBuffer cmd = mf_begin(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                  VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
   mf_compute_bind(cmd, &c, NULL, 0);
   vkCmdDispatch(cmd, 1, 1, 1);
   mf_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
              VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
   mf_submit_wait(d, cmd);

   unsigned wrong = count_wrong(map + OUT_BASE, want, nwant);
   printf("{\"check\": \"%s\", \"ran\": true, \"compared\": %u, \"wrong\": %u}\n", name, nwant,
          wrong);
   vkUnmapMemory(d->dev, buf.mem);
   mf_compute_destroy(d, &c);
   mf_buffer_destroy(d, &buf);
   return wrong;
}

static unsigned
run_check(struct mf_device *d, const char *name, const uint32_t *spv, size_t spv_size,
          const uint32_t *v, const uint32_t *want, unsigned nwant)
{
   return run_check_at(d, name, spv, spv_size, v, want, nwant, 0, false);
}

static void
not_run(const char *name, const char *why)
{
   printf("{\"check\": \"%s\", \"ran\": false, \"why\": \"%s\"}\n", name, why);
}

/* A pipeline that requires the device's largest subgroup size. */
static void
required_subgroup_size(struct mf_device *d, struct mf_instance *mi, const struct caps *c,
                       bool validate)
{
   bool listed = c->ssc_props.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT;
   if (!listed && !validate) {
      not_run("required_subgroup_size", "the compute stage is not in requiredSubgroupSizeStages");
      return;
   }
   struct mf_buffer buf;
   mf_buffer_create(d, 4096, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, -1,
                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, &buf);
   struct mf_compute comp;
   mf_compute_create(d, fill_spv, sizeof(fill_spv), 8, buf.buf, NULL, 0, &comp);

   VkShaderModuleCreateInfo smci = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = sizeof(fill_spv),
      .pCode = fill_spv,
   };
   VkShaderModule mod;
   MF_CHECK(vkCreateShaderModule(d->dev, &smci, NULL, &mod));
   VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
      .requiredSubgroupSize = c->ssc_props.maxSubgroupSize,
   };
   VkComputePipelineCreateInfo cpci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {
         .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
         .pNext = &rss,
         .stage = VK_SHADER_STAGE_COMPUTE_BIT,
         .module = mod,
         .pName = "main",
      },
      .layout = comp.layout,
   };
   unsigned before = mi->messages;
   VkPipeline pipe = VK_NULL_HANDLE;
   VkResult r = vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &cpci, NULL, &pipe);
   printf("{\"check\": \"required_subgroup_size\", \"ran\": true, \"size\": %u, "
          "\"listed\": %s, \"result\": \"%s\", \"validation_messages\": %u}\n",
          rss.requiredSubgroupSize, B(listed), mf_result_str(r), mi->messages - before);
   if (pipe)
      vkDestroyPipeline(d->dev, pipe, NULL);
   vkDestroyShaderModule(d->dev, mod, NULL);
   mf_compute_destroy(d, &comp);
   mf_buffer_destroy(d, &buf);
}

static void
usage(void)
{
   fprintf(stderr, "usage: mesa-fork-fastpath-probe [--compute] [--validate] [--device N]\n"
                   "       mesa-fork-fastpath-probe --self-test\n");
   exit(64);
}

int
main(int argc, char **argv)
{
   bool compute = false, validate = false;
   int device = 0;
   for (int i = 1; i < argc; ++i) {
      if (!strcmp(argv[i], "--self-test") && argc == 2)
         return self_test();
      else if (!strcmp(argv[i], "--compute"))
         compute = true;
      else if (!strcmp(argv[i], "--validate"))
         validate = true;
      else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
         char *end;
         device = strtol(argv[++i], &end, 10);
         if (*end || device < 0)
            usage();
      } else
         usage();
   }

   struct mf_instance mi;
   VkResult r = mf_instance_create(&mi, "mesa-fork-fastpath-probe", validate);
   if (r != VK_SUCCESS) {
      fprintf(stderr, "mesa-fork-fastpath-probe: vkCreateInstance: %s\n", mf_result_str(r));
      return 2;
   }
   uint32_t n = 0;
   vkEnumeratePhysicalDevices(mi.instance, &n, NULL);
   if ((uint32_t)device >= n) {
      fprintf(stderr, "mesa-fork-fastpath-probe: no device %d (%u found)\n", device, n);
      return 2;
   }
   VkPhysicalDevice *pds = calloc(n, sizeof(*pds));
   vkEnumeratePhysicalDevices(mi.instance, &n, pds);
   VkPhysicalDevice pd = pds[device];
   free(pds);

   struct caps c;
   query(pd, &c);
   print_caps(&c);

   unsigned wrong = 0;
   if (compute) {
      struct mf_device d;
      create_device(&d, pd, &c);
      uint32_t v[WORDS], want[4 * LANES];

      memset(v, 0, sizeof(v));
      if (c.ext_float16_int8 && c.f16i8.shaderFloat16) {
         fp16_inputs(v, want);
         wrong += run_check(&d, "fp16", fp16_spv, sizeof(fp16_spv), v, want, 2 * LANES);
      } else {
         not_run("fp16", "no shaderFloat16");
      }

      memset(v, 0, sizeof(v));
      if (c.ext_int_dot && c.idp.shaderIntegerDotProduct) {
         dot_inputs(v, want);
         wrong += run_check(&d, "int_dot", dot_spv, sizeof(dot_spv), v, want, 4 * LANES);
      } else {
         not_run("int_dot", "no VK_KHR_shader_integer_dot_product");
      }

      if (c.ext_ssc || VK_API_VERSION_MINOR(c.props.apiVersion) >= 3)
         required_subgroup_size(&d, &mi, &c, validate);
      else
         not_run("required_subgroup_size", "no VK_EXT_subgroup_size_control");

      memset(v, 0, sizeof(v));
      ssbo_inputs(v, want);
      wrong += run_check(&d, "ssbo_vec4", ssbo_spv, sizeof(ssbo_spv), v, want, LANES);

      /* The same with the buffer bound as far off 16 bytes as the device
       * allows: the merged loads' addresses are then not 16-byte aligned.
       */
      VkDeviceSize min_align = c.props.limits.minStorageBufferOffsetAlignment;
      if (min_align % 16)
         wrong += run_check_at(&d, "ssbo_vec4_offset", ssbo_spv, sizeof(ssbo_spv), v, want,
                               LANES, min_align < 4 ? 4 : (unsigned)min_align, false);
      else
         not_run("ssbo_vec4_offset", "minStorageBufferOffsetAlignment is a multiple of 16");

      /* A pipeline asking for robust storage buffers on this device,
       * which does not enable robustBufferAccess
       */
      if (c.ext_pipeline_robustness && c.pr.pipelineRobustness)
         wrong += run_check_at(&d, "ssbo_vec4_pipeline_robust", ssbo_spv, sizeof(ssbo_spv), v,
                               want, LANES, 0, true);
      else
         not_run("ssbo_vec4_pipeline_robust", "no VK_EXT_pipeline_robustness");

      mf_device_destroy(&d);

      if (c.robust_buffer_access) {
         VkPhysicalDeviceFeatures robust = {.robustBufferAccess = VK_TRUE};
         mf_device_create_ext(&d, pd, 0, &robust, NULL, NULL, 0);
         wrong += run_check(&d, "ssbo_vec4_robust", ssbo_spv, sizeof(ssbo_spv), v, want,
                            LANES);
         mf_device_destroy(&d);
      } else {
         not_run("ssbo_vec4_robust", "no robustBufferAccess");
      }
   }
   printf("summary: ggml-vulkan will show fp16: %d | int dot: %d; %s\n", ggml_fp16(&c),
          ggml_int_dot(&c),
          !compute ? "no GPU checks run (--compute)"
          : wrong  ? "GPU results DIFFER from the CPU's"
                   : "every GPU check that ran matched the CPU");
   unsigned messages = mi.messages;
   mf_instance_destroy(&mi);
   if (validate && messages)
      printf("validation: %u message(s)\n", messages);
   return wrong ? 1 : 0;
}
