// The public DeviceFacts (kiln/device.hpp) and the heuristics' DeviceInfo hold the same facts:
// the public one is the API's stable form, the internal one is free to grow.
#pragma once

#include "heuristics/device_info.hpp"
#include "kiln/device.hpp"

namespace kiln {

DeviceFacts device_facts(const DeviceInfo& d);
DeviceInfo device_info(const DeviceFacts& f);

}  // namespace kiln
