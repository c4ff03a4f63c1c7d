# lit configuration of the versioning pass's IR-level tests (src/compiler/test).
# ctest passes the tools: lit test -Dplugin=... -Dopt=... -Dfilecheck=... -Dclang=... -Dinclude=...
import lit.formats
import os

config.name = "cairn-versioning"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".ll", ".c"]
config.test_source_root = os.path.dirname(__file__)
params = lit_config.params
for key in ("plugin", "opt", "filecheck", "clang", "include", "exec_root"):
    if key not in params:
        lit_config.fatal("missing -D%s=... (run these tests through ctest)" % key)
config.test_exec_root = params["exec_root"]  # lit's Output/ goes to the build tree
config.substitutions.append(("%opt", "%s -load-pass-plugin=%s" % (params["opt"], params["plugin"])))
config.substitutions.append(
    ("%cairncc", "%s -fpass-plugin=%s -I%s -g" % (params["clang"], params["plugin"], params["include"])))
# FileCheck and `not` from LLVM's tools directory (where FileCheck is).
config.environment["PATH"] = os.path.dirname(params["filecheck"]) + os.pathsep + os.environ.get("PATH", "")
