# -*- Python -*-
# lit configuration for Varuna. Test models are made once per build by
# `python3 -m varuna.testmodels` (small models, fixed seeds, no downloads) into
# <build>/test/models, available to tests as %models.

import os
import subprocess
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "Varuna"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.varuna_obj_root, "test")

llvm_config.with_system_environment(["HOME", "TMPDIR", "PYTHONHASHSEED"])
llvm_config.use_default_substitutions()

python_dir = os.path.join(config.varuna_src_root, "python")
llvm_config.with_environment("PYTHONPATH", python_dir, append_path=True)
config.environment["PYTHONWARNINGS"] = "ignore"

tools = ["varuna-opt", "varuna-translate", "varuna-compile", "varuna-eval",
         "varuna-optim-check", "varuna-ckpt", "varuna-run", "varuna-plan", "varuna-calibrate"]
llvm_config.add_tool_substitutions(tools, [config.varuna_tools_dir])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.varuna_tools_dir, append_path=True)

config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%scripts", os.path.join(config.varuna_src_root, "scripts")))

# Emulated hosts (scripts/netns.sh) need root and iproute2: probe once.
def _can_make_netns():
    name = "varuna-lit-probe-%d" % os.getpid()
    try:
        if subprocess.call(["ip", "netns", "add", name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) != 0:
            return False
        subprocess.call(["ip", "netns", "del", name])
        return subprocess.call(["tc", "-V"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) == 0
    except OSError:
        return False
if _can_make_netns():
    config.available_features.add("netns")

# Generate the test models once (the generator is idempotent and fast when
# everything is up to date).
models = os.path.join(config.test_exec_root, "models")
if not lit_config.isWindows:
    env = dict(os.environ)
    env["PYTHONPATH"] = python_dir + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONWARNINGS"] = "ignore"
    rc = subprocess.call(
        [config.python_executable, "-m", "varuna.testmodels", models],
        env=env, stdout=subprocess.DEVNULL)
    if rc != 0:
        lit_config.fatal("could not generate test models into %s" % models)
config.substitutions.append(("%models", models))

if config.varuna_have_torch:
    config.available_features.add("torch")
try:
    import importlib.util
    if importlib.util.find_spec("transformers") is not None:
        config.available_features.add("transformers")
except Exception:
    pass
