// Umbrella header of the core layer: pure helpers with no OS calls and no heap. Higher layers
// include this file, never the individual headers, so the layer boundary stays visible.
#pragma once

#include "core/bits.hpp"
#include "core/check.hpp"
#include "core/free_list.hpp"
#include "core/poison.hpp"
#include "core/size_class.hpp"
