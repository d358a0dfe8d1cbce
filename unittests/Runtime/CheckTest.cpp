//===- CheckTest.cpp - Checked calls and backend reporting ----------------===//

#include "varuna/runtime/Backends.h"
#include "varuna/runtime/Check.h"
#include <gtest/gtest.h>

static void failingGlooCall() { throw std::runtime_error("connection refused"); }

TEST(Check, GlooErrorNamesCallFileAndCause) {
  try {
    VARUNA_CHECK_GLOO(failingGlooCall());
    FAIL() << "expected an error";
  } catch (const varuna::rt::Error &e) {
    std::string msg = e.what();
    EXPECT_EQ(e.library, "Gloo");
    EXPECT_NE(msg.find("failingGlooCall()"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CheckTest.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("connection refused"), std::string::npos) << msg;
  }
}

#ifdef VARUNA_HAVE_NCCL
TEST(Check, NcclErrorCarriesLibraryString) {
  try {
    VARUNA_CHECK_NCCL(ncclInvalidArgument);
    FAIL() << "expected an error";
  } catch (const varuna::rt::Error &e) {
    EXPECT_EQ(e.library, "NCCL");
    EXPECT_NE(std::string(e.what()).find(ncclGetErrorString(ncclInvalidArgument)),
              std::string::npos);
  }
}

TEST(Backends, NcclVersionWithoutGpu) {
  // ncclGetVersion needs no device: the NCCL path links and runs here.
  EXPECT_FALSE(varuna::rt::ncclVersion().empty());
}
#endif

TEST(Backends, GlooIsBuilt) {
#ifdef VARUNA_HAVE_GLOO
  EXPECT_EQ(varuna::rt::glooVersion().rfind("Gloo ", 0), 0u);
#else
  GTEST_SKIP() << "built without Gloo";
#endif
}
