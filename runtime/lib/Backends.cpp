//===- Backends.cpp - Which communication backends are built --------------===//

#include "varuna/runtime/Backends.h"
#include "varuna/runtime/Check.h"

#ifdef VARUNA_HAVE_GLOO
#include <gloo/config.h>
#endif

using namespace varuna::rt;

std::string varuna::rt::glooVersion() {
#ifdef VARUNA_HAVE_GLOO
  return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
         std::to_string(GLOO_VERSION_MINOR) + "." +
         std::to_string(GLOO_VERSION_PATCH);
#else
  return {};
#endif
}

std::string varuna::rt::ncclVersion() {
#ifdef VARUNA_HAVE_NCCL
  int v = 0;
  VARUNA_CHECK_NCCL(ncclGetVersion(&v));
  int major = v / 10000, minor = (v % 10000) / 100, patch = v % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(patch);
#else
  return {};
#endif
}
