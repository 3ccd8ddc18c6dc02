// Devices without a GPU (issue 23): EngineOptions::device / use_current_context and their C ABI
// fields (the options struct read only as far as the caller's size), the device helpers' errors
// when the driver is absent, and tuning results kept per device name.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "heuristics/tuning_table.hpp"
#include "kiln/device.hpp"
#include "kiln/engine.hpp"
#include "kiln/kiln.h"
#include "tests/user_error.hpp"

using namespace kiln;

namespace {

bool driver_present() {
  if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    return true;
  }
  return false;
}

#define SKIP_WITH_DRIVER() \
  if (driver_present()) GTEST_SKIP() << "a CUDA driver is present: tests/gpu cover this"

TEST(Devices, NegativeOrdinalIsAUserError) {
  EngineOptions o;
  o.device = -1;
  o.load_kernels = false;
  std::string m = test::user_error([&] { Engine e(o); });
  EXPECT_NE(m.find("EngineOptions.device: expected a device ordinal"), std::string::npos) << m;
  EXPECT_NE(m.find("-1"), std::string::npos) << m;
}

TEST(Devices, WithoutADriverAnOrdinalCompilesOnly) {
  SKIP_WITH_DRIVER();
  EngineOptions o;
  o.device = 3;
  o.arch = "sm_90";
  Engine e(o);
  EXPECT_FALSE(e.has_device());
  EXPECT_EQ(e.device(), 3);
  EXPECT_EQ(device_count(), 0);
  std::string why;
  EXPECT_FALSE(cuda_available(&why));
  EXPECT_NE(why.find("libcuda.so.1"), std::string::npos) << why;
  EXPECT_EQ(cuda_driver_version(), 0);
}

TEST(Devices, UseCurrentContextWithoutADriverIsAUserError) {
  SKIP_WITH_DRIVER();
  EngineOptions o;
  o.use_current_context = true;
  std::string m = test::user_error([&] { Engine e(o); });
  EXPECT_NE(m.find("EngineOptions.use_current_context: no CUDA device: "), std::string::npos) << m;
  EXPECT_NE(m.find("libcuda.so.1"), std::string::npos) << m;
}

TEST(Devices, DeviceCallsWithoutADriverSayWhy) {
  SKIP_WITH_DRIVER();
  for (auto f : {+[] { DeviceScope s(0); }, +[] { (void)list_devices(); }, +[] { cuda_init(1); }}) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Driver) << e.what();
      EXPECT_NE(std::string(e.what()).find("CUDA driver not available"), std::string::npos)
          << e.what();
    }
  }
}

// The options struct is read no further than the size the caller was built with.
TEST(Devices, CApiOptionsAreSized) {
  const size_t v1 = offsetof(kiln_engine_options, device);
  kiln_engine_options o;
  std::memset(&o, 0x7f, sizeof(o));
  kiln_engine_options_init(&o, v1);  // a 0.1.0 caller: nothing past tuning_file is written
  EXPECT_EQ(o.fusion, 1);
  EXPECT_EQ(o.tuning_file, nullptr);
  EXPECT_EQ(o.device, 0x7f7f7f7f);
  EXPECT_EQ(o.use_current_context, 0x7f7f7f7f);
  EXPECT_EQ(o.deferred_errors, 0x7f7f7f7f);
  (kiln_engine_options_default)(&o);  // the 0.1.0 symbol: the same
  EXPECT_EQ(o.device, 0x7f7f7f7f);
  kiln_engine_options_default(&o);  // this header's size
  EXPECT_EQ(o.device, 0);
  EXPECT_EQ(o.use_current_context, 0);
  EXPECT_EQ(o.deferred_errors, 0);
  std::memset(&o, 0x7f, sizeof(o));
  kiln_engine_options_init(&o, offsetof(kiln_engine_options, deferred_errors));  // a 0.2 caller
  EXPECT_EQ(o.use_current_context, 0);
  EXPECT_EQ(o.deferred_errors, 0x7f7f7f7f);
  kiln_engine_options_init(&o, v1 - 1);  // too small: untouched, harmless
  kiln_engine_options_init(nullptr, sizeof(o));

  o.load_kernels = 0;
  o.arch = "sm_90";
  o.device = -2;
  kiln_engine e = nullptr;
  EXPECT_EQ(kiln_engine_create(&o, &e), KILN_ERROR_USER);
  EXPECT_NE(std::string(kiln_last_error()).find("EngineOptions.device"), std::string::npos)
      << kiln_last_error();
  // The 0.1.0 entry point and a v1 size never read `device`.
  ASSERT_EQ((kiln_engine_create)(&o, &e), KILN_OK) << kiln_last_error();
  int32_t dev = -1;
  ASSERT_EQ(kiln_engine_device(e, &dev), KILN_OK);
  EXPECT_EQ(dev, 0);
  kiln_engine_destroy(e);
  ASSERT_EQ(kiln_engine_create_sized(&o, v1, &e), KILN_OK) << kiln_last_error();
  kiln_engine_destroy(e);
  EXPECT_EQ(kiln_engine_create_sized(&o, v1 - 4, &e), KILN_ERROR_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("below the smallest"), std::string::npos);
  EXPECT_EQ(kiln_engine_device(nullptr, &dev), KILN_ERROR_ARGUMENT);
  if (driver_present()) return;  // device 2 may not exist: tests/gpu check ordinals
  o.device = 2;
  ASSERT_EQ(kiln_engine_create(&o, &e), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_engine_device(e, &dev), KILN_OK);
  EXPECT_EQ(dev, 2);
  kiln_engine_destroy(e);
}

TEST(Devices, CApiDeviceHelpersWithoutADriver) {
  SKIP_WITH_DRIVER();
  int32_t n = -1;
  EXPECT_EQ(kiln_device_count(&n), KILN_OK);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(kiln_device_count(nullptr), KILN_ERROR_ARGUMENT);
  uint64_t p = 0;
  char buf[16] = {};
  for (kiln_status s : {kiln_device_alloc_on(1, 64, &p), kiln_device_alloc_on(-1, 64, &p),
                        kiln_memcpy_htod_on(1, 256, buf, sizeof(buf)),
                        kiln_memcpy_dtoh_on(0, buf, 256, sizeof(buf)),
                        kiln_stream_synchronize_on(0, nullptr), kiln_device_synchronize(1)}) {
    EXPECT_EQ(s, KILN_ERROR_DRIVER);
    EXPECT_NE(std::string(kiln_last_error()).find("CUDA driver not available"), std::string::npos)
        << kiln_last_error();
  }
  EXPECT_EQ(kiln_device_alloc_on(0, 64, nullptr), KILN_ERROR_ARGUMENT);
  EXPECT_EQ(kiln_memcpy_htod_on(0, 0, buf, sizeof(buf)), KILN_ERROR_ARGUMENT);
  kiln_engine_options o;
  kiln_engine_options_default(&o);
  o.use_current_context = 1;
  kiln_engine e = nullptr;
  EXPECT_EQ(kiln_engine_create(&o, &e), KILN_ERROR_USER);
  EXPECT_NE(std::string(kiln_last_error()).find("use_current_context"), std::string::npos);
}

// Results are per device name; compiling without a device takes any device's (or a class-only
// entry from an older file).
TEST(Devices, TuningResultsAreKeyedByDeviceName) {
  TuningTable t;
  TuningEntry h200, h100, old;
  h200.ms = 1;
  h100.ms = 2;
  old.ms = 3;
  t.put(device_tuning_key("conv|a", "NVIDIA H200"), h200);
  t.put(device_tuning_key("conv|a", "NVIDIA H100 80GB HBM3"), h100);
  t.put("conv|b", old);
  EXPECT_NE(device_tuning_key("conv|a", "X"), device_tuning_key("conv|a", "Y"));
  ASSERT_TRUE(t.find_for("conv|a", "NVIDIA H200"));
  EXPECT_EQ(t.find_for("conv|a", "NVIDIA H200")->ms, 1);
  EXPECT_EQ(t.find_for("conv|a", "NVIDIA H100 80GB HBM3")->ms, 2);
  EXPECT_FALSE(t.find_for("conv|a", "NVIDIA A100-SXM4-80GB"));
  EXPECT_FALSE(t.find_for("conv|b", "NVIDIA H200"));  // measured on some other device
  ASSERT_TRUE(t.find_for("conv|a", ""));
  EXPECT_EQ(t.find_for("conv|b", "")->ms, 3);
  EXPECT_FALSE(t.find_for("conv|", ""));  // a prefix of a class is not the class
  EXPECT_FALSE(t.find_for("conv|c", ""));
}

}  // namespace
