// Everything a program needs to run kernels on the emulator.
#pragma once

#include "core/smem.hpp"
#include "emu_backend.hpp"
#include "emulator.hpp"
#include "explore.hpp"
#include "parametric.hpp"
#include "schedule.hpp"
#include "strategy.hpp"
#include "trace.hpp"
