#pragma once
/// Tier 1: everything needed to run and count dense attention.

#include <ioattn/dense/backward.hpp>
#include <ioattn/dense/forward.hpp>
#include <ioattn/error.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>
