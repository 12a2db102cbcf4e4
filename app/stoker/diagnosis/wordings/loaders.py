"""Wordings of what stops a program before its work starts: glibc's ld.so, dyld, the Windows loader
(NTSTATUS in hex, decimal and signed forms), Python's and .NET's loaders, an engine library from
another build, a taken port or address, and a program or container image that is not there.

Pure data: no files, no clock, nothing run.
"""

from __future__ import annotations

import re

from stoker.diagnosis.wordings.entry import B11434 as _B
from stoker.diagnosis.wordings.entry import Strength, Wordings

_D, _S, _W = Strength.DECISIVE, Strength.STRONG, Strength.WEAK
_wordings = Wordings()
_e = _wordings.add

# ----------------------------------------------------------------------------- loaders

# glibc's version nodes (elf/Versions, sysdeps/*/Versions): its releases' (GLIBC_2.xx) and its
# ABI markers, empty nodes named for a loader feature that a linker adds as a dependency so a
# libc without the feature refuses the file at load instead of failing at random:
# GLIBC_ABI_DT_RELR (elf/Versions, 57292f5, glibc 2.36: DT_RELR relocations, `ld -z
# pack-relative-relocs`), GLIBC_ABI_DT_X86_64_PLT (sysdeps/x86_64/Versions, 399384e, BZ #33212:
# `ld -z mark-plt`), GLIBC_ABI_GNU2_TLS (sysdeps/x86/Versions, 9df8fa3, BZ #33129: the working
# GNU2 TLS run-time) and i386's GLIBC_ABI_GNU_TLS (ed1b7a5, BZ #33221); the last three were
# added after 2.42 (2025, on the way to 2.43) and backported to the release branches (2.33 to
# 2.42 for the PLT marker, 2.38 to 2.42 for the TLS ones), so a marker names no release: it
# says, as a GLIBC_2.xx does, that the libc lacking it is older than the glibc the requiring
# file was linked on. Which libc that is decides the kind, as for a release.
_GLIBC_NODE = r"GLIBC_(?:[\d.]+|ABI_[A-Z0-9_]+)"
_QUOTED = r"[`'‘]?{}[`'’]?"
_SYSTEM_DIR = r"/(?:usr/)?lib(?:32|64)?/"
# The same multiarch directory with its leading slash lost in a paste (`lib/x86_64-linux-gnu/
# libc.so.6: version …` at the start of a line, gpt4all#1438): a Debian triplet directory is the
# system's, not a bundle's.
_SYSTEM_DIR_SLASH_LOST = r"(?:usr/)?lib/[a-z0-9_]+-linux-gnu\w*/"
# glibc's own libraries: one glibc build installs them and libc.so.6 together
_GLIBC_OWN = (r"(?:libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl"
              r"|libBrokenLocale)\.so\.\d+|ld-linux[\w.-]*?\.so\.\d+")
# `version `GLIBC_x' not found (required by `: the two glibc-mixing entries below differ only
# in which side of it is the system's
_GLIBC_MISSING_FOR = r"version " + _QUOTED.format(_GLIBC_NODE) + r" not found \(required by "
_e("ld.versioned-symbol", "system-too-old", 77, _D,
   "glibc ld.so (dl-version.c): `version `GLIBC_2.xx' not found (required by ...)`, and glibc's "
   "ABI markers (`GLIBC_ABI_DT_RELR`, 2.36; `GLIBC_ABI_DT_X86_64_PLT`, `GLIBC_ABI_GNU2_TLS`, "
   "2025, backported) in the same words",
   "the system's C or C++ runtime is older than the build needs",
   r"version " + _QUOTED.format(rf"(?:{_GLIBC_NODE}|GLIBCXX_[\d.]+|CXXABI_[\d.]+)") + r" not found")
_e("ld.versioned-symbol-bundled", "stale-library", 78, _D,
   "glibc ld.so (dl-version.c) `<library>: version `X' not found`: the library named is the one "
   "lacking the version; outside /lib and /usr/lib it is a bundled or environment copy (conda, "
   "a venv, an app folder) found before the system's",
   "an older copy of the C/C++ runtime shipped beside the program shadows the system's, which "
   "may well be new enough: the copy is stale, the system is not too old",
   rf"(?<![\w/.~-])(?!{_SYSTEM_DIR}|{_SYSTEM_DIR_SLASH_LOST})(?:[A-Za-z]:)?[\w./~+-]*/lib(?:stdc\+\+|gcc_s|c|m|pthread|dl)"
   r"\.so\.\d+: version " + _QUOTED.format(rf"(?:{_GLIBC_NODE}|GLIBCXX_[\d.]+|CXXABI_[\d.]+|GCC_[\d.]+)")
   + " not found")
# LocalAI#9093 (spent batch 21): the cuda13 backend's bundled libc.so.6 lacked
# GLIBC_ABI_DT_X86_64_PLT, which Debian sid's own libpthread.so.0 needs; fixed by bundling
# libpthread, libdl and librt too (LocalAI#9099). A system's glibc libraries and its libc come
# from one build, so one of them requiring a version the libc loaded lacks proves another libc
# was loaded beside them, whatever path (if any) the line gives the libc.
_e("ld.glibc-own-requirer", "stale-library", 79, _D,
   "glibc ld.so (dl-version.c) `version `GLIBC_x' not found (required by /usr/lib/.../libpthread.so.0)`: "
   "the file requiring the version is one of glibc's own libraries in /lib or /usr/lib "
   "(LocalAI#9093, fixed by LocalAI#9099)",
   "the system's own glibc library needs a version the libc loaded beside it lacks: that libc is "
   "another (bundled, older) glibc's, mixed with the system's; the system is not too old",
   _GLIBC_MISSING_FOR + rf"{_SYSTEM_DIR}(?:[\w.+-]+/)*(?:{_GLIBC_OWN})\)")
# The reverse mix: a bundle carries part of glibc (its libpthread, libdl...) and the system's
# libc lacks a version it needs. The system is older than the bundle's glibc, or the bundle
# lacks the libc (and ld.so) that go with its parts; the line cannot tell, so classify's
# open_readings.left_open leaves it open between system-too-old and stale-library.
_e("ld.glibc-part-bundled", "system-too-old", 79, _D,
   "glibc ld.so (dl-version.c) `/lib/.../libc.so.6: version `GLIBC_x' not found (required by "
   "<glibc's own library outside /lib and /usr/lib>)`",
   "a bundled piece of a newer glibc needs a version the system's libc lacks: the system is "
   "older than the bundle, or the bundle is incomplete; left open",
   rf"(?<![\w/.~-]){_SYSTEM_DIR}(?:[\w.+-]+/)*libc\.so\.6: " + _GLIBC_MISSING_FOR
   + rf"(?!{_SYSTEM_DIR})[^)]*/(?:{_GLIBC_OWN})\)")
# A library outside the system's directories lacking a version that a library of the system's
# own needs (`/tmp/.mount_Jan-x/usr/lib/libcrypto.so.3: version `OPENSSL_3.3.0' not found
# (required by /lib64/libssl.so.3)`, janhq/jan#7831): the system's library was built against the
# system's copy, which the bundle's older copy (an AppImage mount, an app or conda folder on the
# library path) shadows. The system is not too old and nothing is missing: the copy is stale. Ranked
# above the two entries below, which read the same words without knowing who required what; the C
# and C++ runtimes' own nodes (GLIBC_, GLIBCXX_, CXXABI_, GCC_) are the glibc entries' above.
_e("ld.bundled-copy-under-system-requirer", "stale-library", 79, _D,
   "glibc ld.so (dl-version.c) `<library>: version `<node>' not found (required by <library in /lib "
   "or /usr/lib>)` where the library lacking the node is outside /lib and /usr/lib",
   "a bundled copy of a library shadows the system's, whose own libraries need the newer one",
   rf"(?<![\w/.~-])(?!{_SYSTEM_DIR}|{_SYSTEM_DIR_SLASH_LOST})(?:[A-Za-z]:)?[\w./~+-]*/lib[\w+-]*\.so[\w.]*: "
   rf"version [`'‘](?!GLIBC|GLIBCXX|CXXABI|GCC_)[^`'’]+[`'’] not found \(required by {_SYSTEM_DIR}[^)]*\)")
# The same message with the file's own name as the missing node (`libcublas.so.11: version
# `libcublas.so.11' not found`): the library the loader opened has the right name and major, yet
# is not the build the program was linked against (an older point release, a stub, a copy from
# another toolkit), so it shadows the right one. Ranked above the entry below, which reads the
# same line when the node names another major: then that major is what is missing.
_e("ld.library-version-same-name", "stale-library", 78, _D,
   "glibc ld.so (dl-version.c): `<file>: version `<node>' not found (required by …)` where the "
   "node is the file's own soname",
   "a library with the right name was found but is another build of it (it lacks its own version node)",
   r"(?:^|[/\\\s])(lib[\w+-]+\.so\.\d+)[\w.]*: version [`'‘]\1[`'’] not found")
_e("ld.library-version", "missing-library", 77, _D,
   "glibc ld.so (dl-version.c) for a library's own version node (libcudart.so.12, LIBCUDA)",
   "the library found is another major version than the one the build needs: the right one is missing",
   r"version [`'‘]?(?!GLIBC|GLIBCXX|CXXABI)(lib\w[\w.+-]*|[A-Z][A-Z0-9_]+)[\w.]*[`'’]? not found \(required by")
# The Windows loader's STATUS_ENTRYPOINT_NOT_FOUND message (`The procedure entry point %s could not
# be located in the dynamic link library %s`, which users also retell in their own words) naming
# one of Windows' own DLLs: a function this Windows does not have yet (gpt4all#2223: Windows 7's
# user32.dll without SkipPointerFrameMessages, Windows 8's). Another DLL there is another
# build's (ld.stale-symbol).
_WINDOWS_OWN_DLL = (r"(?:kernel32|kernelbase|user32|gdi32|advapi32|ntdll|shell32|shlwapi|ole32|oleaut32"
                    r"|combase|ws2_32|bcrypt|bcryptprimitives|crypt32|dxgi|d3d11|d3d12|dwmapi|shcore"
                    r"|api-ms-win-[\w-]+)\.dll")
_e("win.entry-point-in-windows", "system-too-old", 77, _D,
   "the Windows loader (STATUS_ENTRYPOINT_NOT_FOUND 0xC0000139 and its dialog text)",
   "a function the program needs is missing from Windows' own DLL: this Windows is older than the "
   "program supports",
   r"entry point\b.{1,160}?\bin (?:the )?dynamic link library \(?\"?(?:[A-Za-z]:)?(?:[^\s\\]*\\)*"
   + _WINDOWS_OWN_DLL)
_e("dyld.system-too-old", "system-too-old", 77, _D, "macOS dyld",
   "a symbol the build expects in macOS's own libraries: an older macOS",
   # (dyld 4, macOS 12 on, quotes the paths: `Expected in: '/System/Library/Frameworks/…'`)
   r"Expected in:?\s*(<[\w-]+>\s*)?'?/usr/lib/", r"Expected in:?\s*(<[\w-]+>\s*)?'?/System/Library/",
   # Accelerate's new LAPACK interface (`$NEWLAPACK`, `$NEWLAPACK$ILP64` symbols, macOS 13.3 on),
   # which ggml's Accelerate build binds to (ACCELERATE_NEW_LAPACK, ACCELERATE_LAPACK_ILP64): only
   # an older macOS lacks them (llama.cpp#9973)
   r"Symbol not found: \(?_\w+\$NEWLAPACK\b",
   # symbols only macOS itself provides: libc++'s std::__1 (/usr/lib/libc++.1.dylib) and the
   # Objective-C classes of its frameworks (Metal, Foundation, QuartzCore)
   r"Symbol not found: \(?__Z\w*NSt3__1", r"Symbol not found: \(?_OBJC_CLASS_\$_(MTL|NS|CA)\w+",
   r"built for (newer )?macOS( version)? [\d.]+ which is newer than running OS",
   r"was built for newer macOS version",
   # dyld 2 (ImageLoaderMachO.cpp, macOS 10.14 and before: `load command 0x%08X is unknown`): the
   # binary carries a Mach-O load command newer than this dyld, such as LC_DYLD_CHAINED_FIXUPS
   # (0x80000034) that linkers emit for newer deployment targets; only a newer macOS loads it
   # (nomic-ai/gpt4all PR #1511 raised the wheels' minimum macOS for it)
   r"\(load command 0x[0-9a-fA-F]+ is unknown\)")
# A library of macOS's own that this macOS does not have (`Library not loaded: /usr/lib/…`, `Reason:
# tried: '/usr/lib/…' (no such file)`): nothing installs into /usr/lib or /System/Library but macOS,
# so the build was linked against a newer one (libggml-rpc linked to macOS 26's
# /usr/lib/librdma.dylib, unslothai/unsloth#9843, llama.cpp PR #27815). Its rank over ld.missing's
# makes it the reading. A library a newer macOS dropped would read the same; none is known in the
# corpus or the engines' histories.
_e("dyld.system-library-missing", "system-too-old", 77, _D,
   "macOS dyld `Library not loaded: <path>` for a path under /usr/lib or /System/Library",
   "a library of macOS's own that the build links to is not in this macOS: an older macOS",
   r"Library not loaded:\s*'?/usr/lib/", r"Library not loaded:\s*'?/System/Library/")
_e("dyld.stale-symbol", "stale-library", 76, _D,
   "macOS dyld `Symbol not found: _sym` / `Referenced from:` / `Expected in: <library>`",
   "the library dyld found lacks the symbol: outside macOS's own /usr/lib and /System it is "
   "another build's copy",
   r"Expected in:?\s*(<[\w-]+>\s*)?'?(?!/usr/lib/|/System/)[/@~]\S*\.dylib")
_e("dyld.symbol-missing", "stale-library", 20, _W,
   "macOS dyld `Symbol not found: _sym` and a crash report's `DYLD, [0x4] Symbol missing`",
   "a symbol is missing: the `Expected in:` line says whether from macOS (too old) or from "
   "another build's library; without it, a sign only",
   r"Symbol not found: \(?_", r"DYLD, \[0x4\] Symbol missing")
# src/llama-model-loader.h llama_tensor_weight (2024 to b11434): every tensor the loader weighs
# was made by gguf.cpp from this file's own tensor list, then looked up in that list by the name
# ggml_get_name gives it, so in one build the lookup cannot fail. A tensor with no name at all
# (`tensor '' not found in the model`) is the caller reading ggml's tensor through another ggml
# build's layout: two ggml copies in one program (llama-cpp-rs beside whisper-rs's older ggml,
# llama-cpp-rs#731), not the file.
_e("ggml.tensor-name-empty", "stale-library", 76, _S,
   f"src/llama-model-loader.h llama_tensor_weight, {_B}: `tensor '%s' not found in the model` "
   "with an empty name",
   "the program and the ggml library it loaded disagree on ggml's tensor layout: a ggml from "
   "another build",
   r"tensor '' not found in the model")
# Ollama 0.1.2x-0.1.4x gpu/gpu.go took the first cudart64_*.dll on PATH; NVIDIA PhysX installs
# CUDA 3.0's and 6.5's there (`...\PhysX\Common\cudart64_65.dll`), which cannot drive any card
# of Ollama's time and report compute capability 1.0, so Ollama left a working GPU for the CPU.
# The maintainer's diagnosis in ollama#4008 and #4117: the PhysX runtime answered, remove it from
# PATH. A compute capability of 1.x is that reading, whatever the path: no CUDA runtime of
# Ollama's time drives such a card (silent_fallbacks.py leaves it out of a build's own lack).
_e("ollama.foreign-cudart", "stale-library", 74, _S,
   "Ollama 0.1.2x-0.1.4x gpu/gpu.go (`detected GPUs` library=<cudart>, `CUDA GPU is too old. "
   "Compute Capability detected: 1.0`); ollama#4008, #4117",
   "Ollama's GPU discovery loaded an ancient CUDA runtime from PATH (PhysX's) instead of its own, "
   "which misread the card",
   r"library=\"?[^\"]*PhysX[\\/]+Common[\\/]+cudart64_\w+\.dll",
   r"CUDA GPU is too old\. Compute Capability detected: 1\.\d")
# ggml.c's ggml_get_unary_op (b11434 and every release since the unary ops were folded into
# GGML_OP_UNARY) asserts the op it is handed is GGML_OP_UNARY; every caller in a backend checks
# exactly that first, so in one build it cannot fail. It fails when the backend library and
# ggml-base come from different builds whose `enum ggml_op` numbers differ: a foreign ggml DLL
# or .so loaded in place of the program's own. Strong, not decisive: a bug would read the same.
_e("ggml.op-enum-mismatch", "stale-library", 76, _S,
   f"ggml/src/ggml.c ggml_get_unary_op, {_B}: `GGML_ASSERT(tensor->op == GGML_OP_UNARY)`",
   "ggml's parts disagree on the operation numbers: a ggml library from another build was loaded",
   r"GGML_ASSERT\(tensor->op == GGML_OP_UNARY\)")
_e("ggml.backend-abi", "stale-library", 76, _D,
   f"ggml/src/ggml-backend-reg.cpp load_backend, {_B}: a backend library without "
   "`ggml_backend_init`, or built against another ggml API version",
   "a backend library (libggml-*.so / ggml-*.dll) found on the path is another build's",
   r"failed to find ggml_backend_init in", r"failed to initialize backend from .{0,300}incompatible API version")
# Functions only glibc itself provides, with the release that added each (glibc's own
# Versions files: sysdeps/unix/sysv/linux, stdlib, string, malloc). A library that lacks one of
# these at load was linked on a newer glibc than this system's: glibc 2.17 (CentOS 7) has no
# getcpu (2.29), gettid (2.30) or close_range (2.34). ld.so then says `undefined symbol: getcpu`
# (no version node when the reference carries none), the same words as a libllama/ggml of
# another build missing one of its own symbols; only the symbol's owner tells the two apart
# (koboldcpp#705, spent batch 16: koboldcpp 1.58 on CentOS 7). Only names added after 2.17 are
# listed: older ones are in every glibc a build runs on, so missing them means something else.
GLIBC_ONLY_SYMBOLS = {
    "__cxa_thread_atexit_impl": "2.18",
    "getrandom": "2.25", "getentropy": "2.25", "explicit_bzero": "2.25",
    "strfromd": "2.25", "strfromf": "2.25", "strfroml": "2.25",
    "reallocarray": "2.26",
    "memfd_create": "2.27", "mlock2": "2.27", "pkey_alloc": "2.27", "pkey_free": "2.27",
    "pkey_set": "2.27", "pkey_get": "2.27", "pkey_mprotect": "2.27",
    "getcpu": "2.29",
    "gettid": "2.30", "tgkill": "2.30", "getdents64": "2.30",
    "sigdescr_np": "2.32", "sigabbrev_np": "2.32", "strerrordesc_np": "2.32", "strerrorname_np": "2.32",
    "mallinfo2": "2.33",
    "close_range": "2.34",
    "__memcmpeq": "2.35",
    "arc4random": "2.36", "arc4random_buf": "2.36", "arc4random_uniform": "2.36",
    "strlcpy": "2.38", "strlcat": "2.38",
    "__isoc23_strtol": "2.38", "__isoc23_strtoll": "2.38", "__isoc23_strtoul": "2.38",
    "__isoc23_strtoull": "2.38", "__isoc23_strtoimax": "2.38", "__isoc23_strtoumax": "2.38",
}
_e("ld.glibc-symbol-undefined", "system-too-old", 77, _D,
   "glibc ld.so (dl-lookup.c) `undefined symbol: %s` for a function glibc itself added after 2.17 "
   "(GLIBC_ONLY_SYMBOLS, from glibc's Versions files)",
   "the library was built against a newer glibc than the system's: the system is too old, no "
   "library of another build is to blame",
   r"undefined symbol: (?:" + "|".join(re.escape(s) for s in sorted(GLIBC_ONLY_SYMBOLS, key=len, reverse=True))
   + r")(?!\w)", case=True)
# Inside WSL 2 the NVIDIA libraries are WSL's own, under /usr/lib/wsl/lib (libcuda.so.1,
# libnvidia-ml.so.1, passed through from the Windows driver). A Linux driver package installed in
# the distribution adds libcuda.so.<version> and libnvidia-ml.so.<version> under /usr/lib, which
# are found first and fail there (NVML error 9, CUDA error 100 `no CUDA-capable device`): NVIDIA's
# CUDA on WSL guide says never to install one. A line listing such a versioned library beside
# WSL's path (Ollama gpu.go's `Discovered GPU libraries: [...]`, ollama#1940) shows the shadowing.
_e("wsl.linux-driver-libraries", "stale-library", 72, _S,
   "NVIDIA CUDA on WSL User Guide (a Linux display driver must not be installed inside WSL 2); "
   "Ollama gpu/gpu.go 0.1.x `Discovered GPU libraries: [...]`",
   "a Linux NVIDIA driver's libraries installed inside WSL 2 are found before WSL's own and cannot "
   "reach the GPU: remove the distribution's NVIDIA driver packages and use /usr/lib/wsl/lib",
   r"/usr/lib/[\w-]*/?lib(?:nvidia-ml|cuda)\.so\.\d{3}\.\d+\S*.*?/usr/lib/wsl/(?:lib|drivers)/",
   r"/usr/lib/wsl/(?:lib|drivers)/\S*.*?/usr/lib/[\w-]*/?lib(?:nvidia-ml|cuda)\.so\.\d{3}\.\d+")
_e("ld.stale-symbol", "stale-library", 76, _D,
   "glibc ld.so `symbol lookup error`/`undefined symbol`; dyld `Symbol not found`; Windows "
   "STATUS_ENTRYPOINT_NOT_FOUND 0xC0000139 / ERROR_PROC_NOT_FOUND 127, STATUS_INVALID_IMAGE_FORMAT 0xC000007B",
   "a library of the same name from another build (or another architecture) shadows the build's own",
   r"symbol lookup error", r"undefined symbol", r"could not be located in the dynamic link library",
   r"wrong ELF class", r"\[WinError 193\]", r"is not a valid Win32 application",
   r"\[WinError 127\]", r"The specified procedure could not be found", r"incompatible architecture \(have",
   r"STATUS_ENTRYPOINT_NOT_FOUND", r"STATUS_INVALID_IMAGE_FORMAT", r"\b0xc0000139\b", r"\b0xc000007b\b",
   r"\b3221225785\b", r"\b3221225595\b", r"-1073741511\b", r"-1073741701\b",
   r"ELFCLASS32", r"mach-o file, but is an incompatible architecture",
   # Android's bionic linker (linker/linker_relocate.cpp): `cannot locate symbol "%s" referenced
   # by "%s"`: the library found is not the one the program was built against
   r"cannot locate symbol \"[^\"]+\" referenced by",
   r"LoadLibrary\w* failed (with error|:)\s*(127|193)\b", r"\bERROR_BAD_EXE_FORMAT\b")
# rpc-server (ggml/src/ggml-rpc/ggml-rpc.cpp ggml_backend_rpc_start_server and transport.cpp
# socket_t::create_server, b11434): the socket takes SO_REUSEADDR, so a port in TIME_WAIT binds;
# a failed bind or listen is another listener on the port (or an address not this machine's).
# A host that is no IPv4 address is refused first, in words of its own (a bad argument).
_e("rpc.server-port", "port-in-use", 75, _S,
   f"ggml/src/ggml-rpc/ggml-rpc.cpp (`Failed to create server socket`), {_B}",
   "the RPC worker could not listen on its port: another program holds it",
   r"^Failed to create server socket$", case=True)
_e("rpc.server-host", "bad-argument", 76, _D,
   f"ggml/src/ggml-rpc/transport.cpp (`Invalid host address: %s`), {_B}",
   "the RPC worker was given a host that is not an IPv4 address (`-H`)",
   r"^Invalid host address: \S+", case=True)
_e("net.port-in-use", "port-in-use", 75, _D,
   f"tools/server/server-http.cpp, {_B} (`couldn't bind HTTP server socket`); older server.cpp; "
   "errno EADDRINUSE 98/48, WSAEADDRINUSE 10048; wrappers' Go/Node/Python listeners",
   "another program holds the port (or the address is not this machine's)",
   r"couldn't bind (HTTP server|to server) socket", r"exiting due to HTTP server error",
   r"address already in use", r"EADDRINUSE", r"error while attempting to bind on address",
   r"\[Errno (48|98|99)\]", r"cannot assign requested address", r"only one usage of each socket address",
   r"WSAEADDRINUSE", r"\[WinError 10048\]", r"bind: An attempt was made to access a socket",
   # Docker's daemon (moby libnetwork portallocator ErrPortAlreadyAllocated): `docker run -p`
   # asked for a host port another container or program holds
   r"Bind for \S+ failed: port is already allocated",
   # WSAEACCES 10013: the port is in a range Windows reserves (Hyper-V/WinNAT) or held exclusively
   r"\[(WinError|Errno) 10013\]", r"WSAEACCES",
   r"port \d+ is (already )?(in use|taken|occupied)",
   # koboldcpp.py RunServerMultiThreaded: its own connect test before it binds
   r"Port \d+ already appears to be in use by another program",
   # Qt's QAbstractSocket::AddressInUseError text (gpt4all's API server)
   r"The bound address is already in use", r"failed to (start|bind).{0,40}port \d+.{0,20}in use",
   # Node's listen error object (LM Studio, Jan, OpenHands' servers), printed by util.inspect
   # or JSON.stringify: EADDRINUSE anywhere; EACCES with libuv's Windows errno -4092 is a port
   # Windows reserves (Hyper-V/WinNAT exclusions) or another program holds exclusively
   r"\"code\":\s*\"EACCES\",\s*\"errno\":\s*-4092,\s*\"syscall\":\s*\"listen\"",
   r"code: 'EACCES',\s*errno: -4092,\s*syscall: 'listen'",
   # ... and the same error as its message (libuv's uvException: `listen EACCES: permission
   # denied <addr>:<port>`): on a port of 1024 and up no privilege is missing, so the port is one
   # Windows reserves or another program holds exclusively; under 1024 it may be the privilege
   r"listen EACCES: permission denied \S*:[1-9]\d{3,4}\b",
   # Lemonade's lemond (its cpp-httplib server, 2026: `Failed to bind IPv4 HTTP server to %s:%d`, and
   # the IPv6 twin): bind_to_port gives no reason, as llama-server's own wording above does not
   r"Failed to bind (IPv4 |IPv6 )?HTTP server to \S+:\d+")
_e("net.bind-localized", "port-in-use", 75, _S,
   "Go's net package: `listen tcp <addr>: bind: <the OS's reason>`, the reason localized by "
   "Windows' FormatMessage (Turkish, Chinese, …) where the English words are not there",
   "the listener could not bind its address: another program holds it (or it is reserved)",
   r"\blisten (tcp|tcp4|tcp6) \S+: bind: \S")
# Go's net package: net.Listen splits the address first (ipsock.go SplitHostPort), and a value
# that is not host:port never reaches bind: `listen tcp: address 8000: missing port in address`
# (llama-swap's `--listen 8000`, Ollama's OLLAMA_HOST with a bare port in older releases).
_e("net.listen-address-invalid", "bad-argument", 70, _S,
   "Go net/ipsock.go SplitHostPort (`missing port in address`, `too many colons in address`), "
   "wrapped by net.Listen as `listen tcp: address %s: %s` (llama-swap, Ollama, Docker Model Runner)",
   "the listen address the wrapper was given is not host:port: the value is wrong, not the port taken",
   r"\blisten (tcp|tcp4|tcp6): address \S+: (missing port in address|too many colons in address)")
# PyInstaller's bootloader on Windows (bootloader/src/pyi_pythonlib.c, 2015 to 2026: `Error loading
# Python DLL '%s'.` then `LoadLibrary: <Windows' message>`): the Python DLL it just extracted, or one
# of its dependencies, did not load (koboldcpp.exe, koboldcpp#147). The DLL is in the bundle, so a
# dependency is what is missing; for Python 3.9 and later that may be Windows 8's API sets on
# Windows 7 (classify.py leaves that open).
_e("pyinstaller.python-dll-load-failed", "missing-library", 76, _D,
   "PyInstaller bootloader pyi_pythonlib.c (`Error loading Python DLL '%s'.`, `LoadLibrary: %s`)",
   "the Python DLL a PyInstaller bundle carries could not be loaded: a dependency of it is missing",
   r"Error loading Python DLL '[^']*python3\d+\.dll'")
# Python's import system (Lib/importlib/_bootstrap.py, 3.6 on: `ModuleNotFoundError: No module
# named '%s'`; Python 2's `ImportError: No module named %s`): a package the program imports is not
# installed where this interpreter looks (containers/ramalama#1362: the image's Python was another
# version than the one its packages were installed for). Only the exception's own line, not a
# program's prose about an optional module.
_e("python.module-missing", "missing-library", 72, _D,
   "CPython importlib (`ModuleNotFoundError: No module named '%s'`), Python 2 (`ImportError: No module named %s`)",
   "a Python package the program imports is not installed for the interpreter that runs it",
   r"ModuleNotFoundError: No module named '[^']+'", r"ImportError: No module named '?[\w.]+")
_e("ld.missing", "missing-library", 75, _D,
   "glibc ld.so `error while loading shared libraries`; dlopen; dyld `Library not loaded`; "
   "Windows STATUS_DLL_NOT_FOUND 0xC0000135 / ERROR_MOD_NOT_FOUND 126, STATUS_DLL_INIT_FAILED 0xC0000142",
   "a library the engine needs is not installed or not on the loader's path",
   r"error while loading shared libraries", r"cannot open shared object file",
   r"dyld(\[\d+\])?: Library not loaded", r"The code execution cannot proceed because .*\.dll",
   r"\.dll was not found", r"Could not find module .*\.dll", r"\[WinError 126\]",
   # the JDK's Windows library loader (linker_md.c, os_windows.cpp) for ERROR_MOD_NOT_FOUND on a
   # DLL that exists: `<path>.dll: Can't find dependent libraries` (java-llama.cpp's jllama.dll)
   r"Can't find dependent libraries",
   # the same STATUS_DLL_NOT_FOUND dialog in the system's language (Windows 8 on; the names as
   # users paste them: Chinese, Japanese, German, Portuguese), and Windows 7's older wording
   r"由于找不到\s*\S+?\.dll\s*[，,]?\s*无法继续执行代码",
   r"\S+\.dll\s*が見つからないため、コードの実行を続行できません",
   r"Ausführung des Codes kann nicht fortgesetzt werden, da \S+\.dll nicht gefunden wurde",
   r"execução de código não pode continuar porque \S+\.dll não foi encontrad",
   r"The program can't start because \S+\.dll is missing from your computer",
   # (not Ollama's probe for an AMD GPU, gpu/ and discover/amd_hip_windows.go, logged at DEBUG
   # by amd_windows.go on every Windows machine without AMD's HIP runtime, whatever GPU it has:
   # 0.1.29-0.2 `unable to load amdhip64.dll: The specified module could not be found.`, 0.3-0.12
   # `unable to load amdhip64_6.dll, please make sure to upgrade to the latest amd driver: The
   # specified module could not be found.`)
   r"(?<!amdhip64\.dll: )(?<!to the latest amd driver: )The specified module could not be found",
   r"dyld(\[\d+\])?: image not found", r"Library not loaded: @rpath",
   r"LoadLibrary\w* failed (with error|:)\s*126\b", r"\bERROR_MOD_NOT_FOUND\b",
   r"STATUS_DLL_NOT_FOUND", r"STATUS_DLL_INIT_FAILED", r"\b0xc0000135\b", r"\b0xc0000142\b",
   r"\b3221225781\b", r"\b3221225794\b", r"-1073741515\b", r"-1073741502\b",
   r"CUDA driver is a stub library", r"cudaErrorStubLibrary", r"failed to load (the )?(CUDA|ROCm|HIP|Vulkan) backend",
   r"libcuda\.so\.1: cannot open", r"nvcuda\.dll.{0,30}not found",
   # the runtime DLLs only when said missing: a crash report names them as the faulting module
   r"(vcruntime140|msvcp140|libomp)\w*\.(dll|dylib).{0,60}(not found|missing|could not be (found|loaded))",
   r"(missing|not find|not found|cannot find|could not load).{0,60}\b(vcruntime140|msvcp140|libomp)\w*\.(dll|dylib)",
   r"Failed to load shared library '[^']+'",
   # Implib.so's lazy-loading stubs (arch/common/init.c.tpl, 2022 to 2026: `implib-gen: <lib>:
   # failed to load library '<lib>' via callback '<fn>'` or `via dlopen: <dlerror>`), which
   # lemonade-sdk/llamacpp-rocm's builds use for ROCm's libraries (llamacpp-rocm#44: libamd_comgr.so.3)
   r"implib-gen: \S+: failed to load library '[^']+' via (callback|dlopen)",
   # Android's bionic linker (linker/linker.cpp), quoted by dlerror: `dlopen failed: library
   # "%s" not found` (Termux, the mobile bindings)
   r"dlopen failed: library \"[^\"]+\" not found",
   # ... and the same linker starting a program: `CANNOT LINK EXECUTABLE "%s": library "%s" not
   # found: needed by main executable` (or by another library of the program)
   r"library \"[^\"]+\" not found: needed by",
   r"OSError: .{0,80}\.(so|dll|dylib)[\w.]*: cannot open",
   # llama-cpp-python llama_cpp.py _load_shared_library; LocalAI's backend loader
   r"Shared library with base name '[^']+' not found", r"backend not found: \S+",
   # src/llama.cpp llama_model_load_from_file_impl, b11434: the ggml backend libraries are absent
   r"no backends are loaded\. hint: use ggml_backend_load",
   r"Backend not found backend=",
   # LocalAI pkg/model/initializers.go: the backend's gRPC binary is not on disk (os.IsNotExist)
   r"grpc process not found(: | in assetdir)", r"\bFails: grpc process not found\b",
   # glibc's ldd (elf/ldd.bash.in via ld.so --list): a needed library the loader cannot find
   r"^\s*\S+\.so[\w.]*\s+=>\s+not found\s*$",
   # the wrappers that launch llama-server as a program: Ollama 0.12+ llm/server.go
   # (`llama-server binary not found (checked: ...)`, an install without its lib/ollama
   # payload), and the launchers' own checks of the same words
   r"llama-server binary not found", r"llama-server(\.exe)? (executable|binary) (was )?not found",
   r"could not find (the )?llama-server (binary|executable)",
   # koboldcpp.py (`KoboldCPP couldn't locate any backends to use`): none of its backend
   # libraries (koboldcpp_default/_cublas/_vulkan/_clblast) is beside it
   r"KoboldCPP couldn'?t locate any backends to use",
   # Unsloth Studio studio/backend core/inference (2026, LLAMA_SERVER_NOT_FOUND_DETAIL, raised as
   # LlamaServerNotFoundError): `This is a GGUF model, but the llama.cpp runtime (llama-server)
   # is not installed. Run `unsloth studio setup` ...`; the same words in other launchers
   # (`the built-in runtime (llama-server) is not installed`, `llama.cpp (llama-server) is not
   # installed`): the program the wrapper launches is not on disk (unsloth#8184: an antivirus
   # had removed it)
   r"\(llama-server\) is not installed", r"\bLlamaServerNotFoundError\b",
   # node-llama-cpp src/bindings/getLlama.ts (2024-2026): no prebuilt binary fits this machine and
   # none could be built (NoBinaryFoundError, its default message the class name)
   r"\bNoBinaryFoundError\b")
# A program whose ELF interpreter (its PT_INTERP, glibc's /lib64/ld-linux-x86-64.so.2) is absent:
# execve fails with ENOENT on a file that exists. bash 5.2 (execute_cmd.c) says `cannot execute:
# required file not found`; older shells and kernels `bad ELF interpreter: No such file or
# directory`. A glibc build on a musl system (Alpine, Void musl) or a 32-bit loader not installed.
# A script (`.sh`, `.py`) names its #! interpreter the same way, a line ending or a shell, not a
# library, so a script's path is left out.
_e("ld.interpreter-missing", "missing-library", 75, _D,
   "bash 5.2 execute_cmd.c (`cannot execute: required file not found`); the kernel's ENOENT for a "
   "missing PT_INTERP as older shells word it (`bad ELF interpreter: No such file or directory`)",
   "the program's loader (its ELF interpreter) is not on this system",
   r"(?<!\.sh)(?<!\.bash)(?<!\.py): cannot execute: required file not found",
   r"bad ELF interpreter: No such file or directory")
# The AppImage runtime (AppImageKit squashfuse_dlopen.h, the type-2 runtime LM Studio's and Jan's
# Linux AppImages start with): it dlopens libfuse.so.2 to mount itself, and on a system without
# FUSE 2 (Ubuntu 22.04 on, Kubuntu, Fedora: only fuse3) stops before the program runs
# (lmstudio-ai/docs#247; installing libfuse2 fixed it).
_e("appimage.fuse-missing", "missing-library", 75, _D,
   "AppImageKit squashfuse_dlopen.h / .c (`dlopen(): error loading libfuse.so.2`, then `AppImages "
   "require FUSE to run.`), 2017 to the static runtime",
   "the AppImage's runtime cannot load FUSE 2 (libfuse.so.2), so the program never starts",
   r"dlopen\(\): error loading libfuse\.so", r"AppImages require FUSE to run")
# .NET bindings (LLamaSharp, and any P/Invoke binding over libllama): the CLR's own exceptions.
_e("dotnet.dll-not-found", "missing-library", 75, _D,
   "the .NET runtime's System.DllNotFoundException (`Unable to load DLL 'llama'` on .NET "
   "Framework, `Unable to load shared library 'llama' or one of its dependencies` on .NET Core)",
   "the binding's native library (or one it depends on) could not be loaded: not installed, not "
   "beside the program, or a dependency missing",
   r"DllNotFoundException: Unable to load (DLL|shared library) '[^']*(llama|ggml|mtmd)[^']*'")
# Java bindings (java-llama.cpp and its forks): the loader that xerial's sqlite-jdbc wrote
# (SQLiteJDBCLoader) and java-llama.cpp's LlamaLoader copies looks for the native library built
# for this OS and CPU in the jar and on java.library.path and, finding none, throws
# `No native library found for os.name=%s, os.arch=%s, paths=[%s]` (java-llama.cpp#37 on
# Android: no Linux-Android/aarch64 build shipped); the JDK's own System.loadLibrary says
# `UnsatisfiedLinkError: no %s in java.library.path` (ClassLoader.loadLibrary).
_e("jvm.native-library-missing", "missing-library", 75, _D,
   "kherud/java-llama.cpp LlamaLoader.loadNativeLibrary (de.kherud.llama, 2023 on; the wording of "
   "xerial sqlite-jdbc's SQLiteJDBCLoader), the JDK's ClassLoader.loadLibrary",
   "the Java binding found no native library built for this OS and CPU, in its jar or on the "
   "library path",
   r"No native library found for os\.name=", r"UnsatisfiedLinkError: no \S+ in java\.library\.path")
# LLamaSharp's NativeApi static constructor (LLama/Native/NativeApi.cs, then NativeApi.Load.cs,
# 0.5 to 0.2x) calls llama_empty_call() and turns ANY DllNotFoundException into
# `RuntimeError: The native library cannot be correctly loaded. It could be one of the
# following reasons: 1. No LLamaSharp backend was installed ... 3. One of the dependency of
# the native library is missed ... 4. Try to compile llama.cpp yourself`, dropping the inner
# exception and with it the loader's reason. On Linux .NET throws DllNotFoundException for
# every dlopen failure: the file or a dependency absent, but also a libllama built on a newer
# glibc (`version GLIBC_2.33 not found`: LLamaSharp#285, spent batch 19, a Docker image older
# than the prebuilt library). The line alone therefore names no kind: read as missing-library,
# then left open between missing-library and system-too-old (open_readings.left_open); a line
# that gives the loader's reason (a GLIBC version, `cannot open shared object file`, the
# DllNotFoundException's own text) decides over it.
_e("llamasharp.native-load-failed", "missing-library", 75, _S,
   "LLamaSharp LLama/Native/NativeApi.cs / NativeApi.Load.cs (0.5 to 0.2x) static constructor: "
   "`catch (DllNotFoundException) { throw new RuntimeError(\"The native library cannot be correctly "
   "loaded. ...\") }`, the inner exception dropped; LLama/Native/Load/NativeLibraryUtils.cs "
   "TryLoadLibrary (0.13 to 0.27, `Failed to load the native library. Please check the log for more "
   "information.`) when no candidate loads",
   "LLamaSharp could not load its native library and dropped the loader's reason: a library or "
   "dependency missing, or one built for a newer system (glibc) than this one",
   r"The native library cannot be correctly loaded\. It could be one of the following reasons",
   # NativeLibraryUtils.TryLoadLibrary (LLama/Native/Load, 0.13 to 0.27): every candidate's
   # NativeLibrary.TryLoad failed with fallback off; its log's `Failed Loading '%s'` lines carry no
   # reason either (LLamaSharp#1275)
   r"Failed to load the native library\. Please check the log for more information")
_e("dotnet.entry-point", "stale-library", 76, _D,
   "the .NET runtime's System.EntryPointNotFoundException (`Unable to find an entry point named "
   "'llama_x' in DLL 'llama'` / `in shared library`), thrown when a P/Invoke is first bound",
   "the binding found a libllama, but one of another llama.cpp version: a function the binding "
   "declares is missing or changed (LLamaSharp supports exactly one llama.cpp commit per release)",
   r"Unable to find an entry point named '(llama|ggml|mtmd|llava|clip)_\w+'")
_e("python.ctypes-missing-export", "stale-library", 76, _D,
   "CPython Modules/_ctypes/_ctypes.c (`function '%s' not found` on Windows, where GetProcAddress "
   "fails; elsewhere dlerror's words: macOS's `dlsym(0x…, name): symbol not found`, Linux's "
   "`undefined symbol`, read by ld.stale-symbol)",
   "the Python binding (llama-cpp-python and its kin) loaded a llama.cpp library that lacks a "
   "function it declares: a library from another llama.cpp version than the binding's",
   r"AttributeError: function '(llama|ggml|gguf|mtmd|llava|clip|whisper)_\w+' not found",
   # macOS: ctypes raises AttributeError with dlerror's own words, `dlsym(<handle>, <name>):
   # symbol not found` (libdyld), where Linux's dlerror says `undefined symbol`
   r"dlsym\(0x[0-9a-fA-F]+, _?(llama|ggml|gguf|mtmd|llava|clip|whisper)_\w+\): symbol not found",
   # a traceback cut before that last line, still inside ctypes' CDLL.__getattr__ (Lib/ctypes/
   # __init__.py): it runs only for a name not yet bound, and a traceback passes through it only
   # when the library had no such export; IPython's frame (`…\ctypes\__init__.py:387, in
   # CDLL.__getattr__(self, name)`) and Python's (`…ctypes/__init__.py", line 387, in __getattr__`)
   # (llama-cpp-python#127)
   r"ctypes[/\\]__init__\.py(\"?, line |:)\d+, in (CDLL\.)?__getattr__\b")
# The CLR's TypeLoadException IDS_CLASSLOAD_MISSINGMETHODRVA (`Could not load type 'T' from
# assembly 'A' because the method 'M' has no implementation (no RVA).`, dotnet/runtime
# src/coreclr/dlls/mscorrc/mscorrc.rc, .NET Framework 4.x and .NET 5 to 9): thrown while the
# managed TYPE loads, before any native library is opened, for a method with neither a body nor
# a [DllImport]. So the wording proves the binding's assembly declares a native method it does
# not bind: LLamaSharp's own slip (LLamaSharp#863, 0.14.0's llama_encode without DllImport,
# fixed in #864) or a binding built against another llama.cpp than the one it ships with
# (LLamaSharp#1119). A sign only: unknown with it as the candidate unless a line such as the
# EntryPointNotFoundException above corroborates a library of another version.
_e("dotnet.type-load-no-implementation", "stale-library", 30, _W,
   "dotnet/runtime (CoreCLR) and .NET Framework: System.TypeLoadException, resource "
   "IDS_CLASSLOAD_MISSINGMETHODRVA; seen over LLamaSharp 0.14 to 0.2x (LLamaSharp#863, #1119)",
   "the binding's managed type declares a llama.cpp function it does not bind: the binding's own "
   "build slip or a binding/library version mix; the native library was not read yet",
   r"TypeLoadException\b.{0,300}\bmethod '(llama|ggml|mtmd|llava|clip)_\w+' has no implementation",
   r"Could not load type '[^']+' from assembly '[^']+' because the method '(llama|ggml|mtmd|llava|clip)_\w+' "
   r"has no implementation")
# The CLR's fatal `System.AccessViolationException: Attempted to read or write protected
# memory` (dotnet/runtime, .NET Core 2 on: not catchable, `Fatal error.` and the managed stack)
# with a frame that is a binding's native llama.cpp call (LLamaSharp `at
# LLama.Native.SafeLlamaModelHandle.llama_model_load_from_file(...)`). It proves only that
# native code faulted inside that call: a parameter struct of another llama.cpp version
# (LLamaSharp#1174: LLamaSharp 0.22 over a newer libllama), a null model used after a failed
# load, or a driver's fault alike. A sign only: never a kind alone.
_e("dotnet.access-violation-in-native-call", "stale-library", 25, _W,
   "dotnet/runtime: System.AccessViolationException (`Attempted to read or write protected memory`) "
   "with a LLama.Native.* frame of a llama_/ggml_ P/Invoke (LLamaSharp 0.1x to 0.2x, LLamaSharp#1174)",
   "native code faulted inside a llama.cpp call the binding made: a library of another version is "
   "one cause among several (a failed load, a driver fault)",
   r"\bat LLama\.Native\.\w+\.(llama|ggml|mtmd|llava|clip)_\w+\(")


def _go_exec_not_found(program: str) -> str:
    """Go os/exec's spawn error for a program name matching `program`: `exec: "<name>": executable
    file not found in $PATH` (`%PATH%` on Windows, lp_windows.go), or `file does not exist` for a
    named path (fs.ErrNotExist); structured logs quote it a second time (`exec: \\"<name>\\": …`)."""
    return rf'exec: \\?"{program}\\?": (executable file not found in (\$PATH|%PATH%)|file does not exist)'


def _crun_not_found(program: str) -> str:
    """crun's error for a container command matching `program` that is not there (crun 1.x:
    `executable file `%s` not found in $PATH`, and for a path `… not found: No such file or directory`)."""
    return rf"executable file `{program}` not found( in \$PATH|: No such file or directory)"


# A launcher's command that names an unexpanded macro or variable (llama-swap's `${name}` macros,
# config.go, expanded only when the `macros:` block parses; a shell's `$VAR` handed through
# unexpanded by a YAML or JSON config): os/exec looks for a program literally called
# `${latest-llama}` (llama-swap#269). The configured command is wrong, not the install.
_e("exec.unexpanded-macro", "bad-argument", 76, _S,
   "Go os/exec's spawn error for a program name holding `${…}` or `$NAME` (llama-swap 2025: "
   "`unable to start process: start() failed: exec: \"${latest-llama}\": executable file not found "
   "in $PATH`; internal/process/process_command.go later: `failed to start command '%s': %w`), and "
   "llama-swap's own refusal of a macro its config does not define (internal/config/macros.go, "
   "2026: `unknown macro '${%s}' found in %s`)",
   "the wrapper's configured command still holds a macro or variable it never expanded (a "
   "malformed or misindented config): fix the config, not the install",
   _go_exec_not_found(r'[^"]*\$(\{[^}"]+\}|[A-Za-z_]\w*)[^"]*'),
   r"fork/exec [^\s:]*\$(\{[^}\s]+\}|[A-Za-z_]\w*)\S*: no such file or directory",
   r"unknown macro '\$\{[^}']+\}'")
_e("exec.program-missing", "missing-library", 75, _S,
   "the launchers' own spawn errors: Go os/exec (`exec: \"llama-server\": executable file not "
   "found in $PATH`, `%PATH%` on Windows, `file does not exist`, `fork/exec <path>: no such file or "
   "directory`: llama-swap "
   "internal/process, Ollama llm/server.go), Node child_process (`spawn <path> ENOENT`: Jan, "
   "LM Studio's lms), Python subprocess (`[Errno 2] No such file or directory: '<llama-server>'`); "
   "in a container, catatonit and crun",
   "the program the wrapper launches is not there (or, for fork/exec, its ELF interpreter is "
   "not): the engine never ran",
   _go_exec_not_found(r'[^"]+'),
   r"fork/exec \S+: no such file or directory",
   # ... and on Windows, where os/exec's CreateProcess fails with ERROR_FILE_NOT_FOUND (Docker
   # Model Runner's `com.docker.nv-gpu-info.exe`, docker/desktop-feedback#613)
   r"fork/exec \S+: The system cannot find the file specified\.",
   r"\bspawn \S+ ENOENT\b", r"No such file or directory: '[^']*llama-server(\.exe)?'",
   # the shells, for llama.cpp's own programs only: zsh, bash, cmd.exe and PowerShell
   r"zsh: command not found: (\S*/)?llama-\w+", r"\bllama-[\w.]+: command not found",
   r"'(\S*\\)?llama-[\w.]+' is not recognized as an internal or external command",
   r"The term '(\S*\\)?llama-[\w.]+' is not recognized as (the )?name of a cmdlet",
   # the container's first process: catatonit, podman's init (`failed to exec pid1: %m`, src
   # catatonit.c since 0.1), and crun (`executable file `%s` not found in $PATH`, crun 1.x; a
   # path: `executable file `%s` not found: No such file or directory`): the command the wrapper
   # runs in its image is not in it (RamaLama's llama-run, containers/ramalama#1144)
   r"\(catatonit:\d+\): failed to exec pid1: No such file or directory",
   _crun_not_found(r"[^`]+"),
   # RamaLama's own words for the same FileNotFoundError (ramalama/model.py 0.5 to 0.10,
   # transports/base.py 2026: `RamaLama requires the "%(cmd)s" command to be installed on the host
   # when running with --nocontainer.`, and `... inside of the container.`): the engine program it
   # execs (llama-run, llama-server) is not where it runs it
   r"RamaLama requires the \"[^\"]+\" command to be installed (on the host|inside of the container)")
# An image reference where the container's command goes: a wrapper's `podman run` line that names
# the image twice (or loses an option's value) makes the runtime execute the second image name
# (containers/ramalama#2843: `crun: executable file `/quay.io/ramalama/ramalama:0.23` not found`).
# A registry host (a dot in it), a path and a `:tag` is no program's path: the command line the
# wrapper built is wrong, not the image.
_IMAGE_REFERENCE = r"/?[a-z0-9-]+(\.[a-z0-9-]+)+(:\d+)?/[\w./-]+:[\w.-]+"
_e("container.image-as-command", "bad-argument", 76, _S,
   "crun (`executable file `%s` not found in $PATH`, `… not found: No such file or directory`) and "
   "runc (Go os/exec: `exec: \"%s\": executable file not found in $PATH`) naming an image "
   "reference (`registry.host/name:tag`) as the program",
   "the container runtime was told to run an image's name as its command: the wrapper's container "
   "command line is malformed (an image named twice, an option without its value)",
   _crun_not_found(_IMAGE_REFERENCE), _go_exec_not_found(_IMAGE_REFERENCE))
# An option where the container's command goes: `podman run` and `docker run` read their own
# options only before the image name, and everything after it is the command and its arguments,
# so a wrapper that puts `-v …` after the image makes the runtime look for a program called
# `-v/home/…` (containers/ramalama#509, RamaLama 0.2.0). No program's name begins with a dash:
# the command line the wrapper built is in the wrong order, not the image.
_OPTION_AS_PROGRAM = r"-[^`\"\s]+"
_e("container.option-as-command", "bad-argument", 76, _S,
   "crun (`executable file `%s` not found in $PATH`) and runc (Go os/exec: `exec: \"%s\": executable "
   "file not found in $PATH`) naming an option (`-v…`, `--…`) as the program",
   "the container runtime was told to run one of the wrapper's options as its command: the options "
   "came after the image name, where the runtime reads the command",
   _crun_not_found(_OPTION_AS_PROGRAM), _go_exec_not_found(_OPTION_AS_PROGRAM))
# crun sets up each mount its container spec lists before it runs anything, and refuses one whose
# host file is not there (crun 1.x: `cannot stat `%s``). A library mounted from the host is the
# GPU driver's, listed by the NVIDIA container toolkit's CDI spec with the driver's version in its
# file names (`libEGL_nvidia.so.550.135`): a spec generated for a driver since replaced names files
# the host no longer has (containers/ramalama#899, NVIDIA/nvidia-container-toolkit#450).
_e("container.mounted-library-missing", "missing-library", 75, _S,
   "crun's refusal of a mount whose host file is not there (`cannot stat `<path>.so…``: No such "
   "file or directory), the file a shared library",
   "a library the container is to mount from the host is not on the host: most often a GPU driver "
   "library listed by a CDI spec written for a driver since updated",
   r"cannot stat `[^`]*\.so(\.[\d.]+)?`: No such file or directory")
_e("exec.wrong-format", "stale-library", 76, _S,
   "Go os/exec `fork/exec <path>: exec format error` (ENOEXEC), Python `[Errno 8] Exec format error`",
   "the program is built for another architecture or OS (the Linux twin of WinError 193): "
   "another build's binary",
   r"fork/exec \S+: exec format error", r"\[Errno 8\] Exec format error")
# WasmEdge's CLI knows --nn-preload only when its WASI-NN plugin (the shared library that carries
# llama.cpp, libwasmedgePluginWasiNN) is installed: the plugin adds the option when it loads
# (plugins/wasi_nn wasinnmodule/wasinnenv), and without it the option parser refuses it.
_e("wasmedge.wasi-nn-plugin-absent", "missing-library", 75, _S,
   "WasmEdge tools/wasmedge (its option parser: `unknown option: %s`) with the WASI-NN plugin's "
   "`--nn-preload` (plugins/wasi_nn), 0.13 to 0.14; LlamaEdge's and GaiaNet's launch lines use it",
   "WasmEdge's WASI-NN plugin library (its llama.cpp) is not installed: the engine never loaded",
   r"^unknown option: nn-preload\b")
_e("ggml.no-cpu-backend", "missing-library", 75, _S,
   f"src/llama-model.cpp, src/llama-model-loader.cpp, common/fit.cpp (`no CPU backend found`), "
   f"src/llama-context.cpp (`failed to initialize CPU backend`), {_B}",
   "a build with loadable backends (GGML_BACKEND_DL) found no libggml-cpu* beside it",
   r"(?<![\w-])no CPU backend found", r"failed to initialize CPU backend")
_e("vulkan.no-driver", "missing-library", 75, _S,
   "VkResult VK_ERROR_INCOMPATIBLE_DRIVER (-9) from vkCreateInstance, as ggml-vulkan's vulkan.hpp "
   "throws it (`vk::createInstance: ErrorIncompatibleDriver`)",
   "the Vulkan loader found no driver (ICD) it can use: a Vulkan build without a Vulkan driver "
   "(none installed, MoltenVK absent, a container without the graphics capability)",
   r"vk::createInstance: ErrorIncompatibleDriver", r"vkCreateInstance.{0,40}VK_ERROR_INCOMPATIBLE_DRIVER")
# The OpenCL counterpart: the Khronos ICD loader (OpenCL-ICD-Loader icd_dispatch.c, and the
# vendors' loaders after it) answers clGetPlatformIDs with CL_PLATFORM_NOT_FOUND_KHR (-1001,
# cl_khr_icd) when it loaded no vendor driver: no /etc/OpenCL/vendors/*.icd, or libraries they
# name that are not there. ggml-opencl's CL_CHECK (CLBlast's of 2023, ggml-opencl.c/.cpp) prints it
# as `ggml_opencl: clGetPlatformIDs(...) error -1001 at <file>:<line>` and stops
# (llama.cpp#1561, #1979).
_e("opencl.no-platform", "missing-library", 75, _S,
   "CL_PLATFORM_NOT_FOUND_KHR (-1001) from clGetPlatformIDs, the Khronos OpenCL ICD loader, as "
   "ggml-opencl's CL_CHECK prints it (2023; b11434 CL_CHECK)",
   "the OpenCL loader found no driver (ICD) to load: an OpenCL build without an OpenCL driver",
   r"clGetPlatformIDs\b.{0,80}\berror -1001\b", r"\bCL_PLATFORM_NOT_FOUND_KHR\b")
_e("metal.library-missing", "missing-library", 75, _S,
   "older ggml-metal.m ggml_metal_init (2023-2024): `ggml-metal.metal` or `default.metallib` not "
   "found beside the program (NSCocoaErrorDomain Code=260)",
   "the Metal shader source or library the build loads at start is not where it looks",
   r"ggml-metal\.metal.{0,40}couldn.t be opened because there is no such file",
   r"NSCocoaErrorDomain Code=260.{0,80}(ggml-metal|default\.metallib)")
_e("metal.library-compile", "system-too-old", 20, _W,
   f"ggml/src/ggml-metal/ggml-metal-device.m, {_B} (`failed to initialize the Metal library`, "
   "`failed to create library`, `kernel not found in any metal library`); older ggml-metal.m "
   "(`Error Domain=MTLLibraryErrorDomain`)",
   "the Metal shaders did not compile or load: an older macOS or GPU lacking a feature the "
   "shaders use, or a damaged bundle; a sign only",
   r"MTLLibraryErrorDomain", r"failed to initialize the Metal library",
   r"ggml_metal\w*: error: failed to create library",
   r"kernel not found in any metal library", r"failed to create Metal library from source",
   # ggml-metal.m of 2023-2024: `ggml_metal_init: load pipeline error: Error Domain=AGXMetal...`
   # (`ggml_metal_init: error: load pipeline error(2, CompilerError): …` in its 2023 kernel loop,
   # llama.cpp#3423), and llama.cpp's `failed to initialize Metal backend` after it
   r"ggml_metal_init: (error: )?load pipeline error", r"failed to initialize Metal backend",
   # ggml-metal-device.m (b11434) ggml_metal_library_compile_pipeline: one kernel's function or
   # pipeline state did not compile for this device
   r"failed to (compile pipeline|create pipeline state): base = ")
_e("metal.shader-rejected", "gpu-error", 40, _S,
   "ggml-metal's shaders compiled at start (ggml_metal_library_init, b11434) against Apple's "
   "MetalPerformancePrimitives tensor ops (Metal 4): its `static_assert` that the operand types "
   "match the cooperative tensor types (`__tensor_ops_detail`), 2026",
   "the GPU's shader compiler rejects ggml's Metal source for this GPU family (a fix in the "
   "engine, not an older macOS)",
   r"static_assert failed due to requirement '__tensor_ops_detail::",
   r"Input types must match cooperative tensor types")
# The same compiler's own diagnostics on ggml's embedded source (newLibraryWithSource names the
# source `program_source`), other than the tensor-ops check above: the shaders and this macOS's
# compiler disagree (llama-server b10595 on macOS 26.2, Nabzx/openstream#172); the context that then
# cannot be made is its echo. Which side is behind, the engine or the system (`unknown type name
# 'bfloat'` before Metal 3.1), the line does not say: classify leaves it open.
_e("metal.source-rejected", "gpu-error", 40, _S,
   "the Metal compiler's diagnostics on ggml's shader source (`program_source:%d:%d: error: %s`), "
   "compiled at start by ggml-metal (newLibraryWithSource)",
   "the shaders and this macOS's Metal compiler disagree: an older macOS lacking a feature they "
   "use, or an older build's shaders on a newer macOS",
   r"^\s*program_source:\d+:\d+: error: (?!static_assert failed due to requirement '__tensor_ops_detail::)")
# Ollama llm/server.go Completion (0.9 to 0.24: `slog.Error("post predict", "error", err)`): the
# request to the runner failed; with Go's `context canceled` the request's own context ended, i.e.
# the client went away (its timeout ran out, or a person cancelled) while the model answered
# (ollama#12291: a 5-minute client timeout on a 29k-token prompt). Ollama then tells the client
# `model runner has unexpectedly stopped`, which it had not.
_e("ollama.client-cancelled-predict", "stopped", 45, _S,
   "Ollama llm/server.go Completion, 0.9 to 0.24 (`msg=\"post predict\" error=\"Post \\\"http://…"
   "/completion\\\": context canceled\"`)",
   "the client closed its request while the model was answering: the run was stopped from outside, "
   "not by a fault",
   r"post predict\W.{0,160}\bcontext canceled")
_e("wrapper.llama-swap-stop", "stopped", 45, _S,
   "llama-swap proxy/process.go (2025: `swapState() State transitioned from %s to stopping`, `Process "
   "timed out waiting to stop, sending KILL signal`), internal/process (2026: `process stopped by "
   "llama-swap`)",
   "the wrapper stopped the engine on purpose (an unload, a swap, a shutdown), killing it when it "
   "did not stop in time",
   r"State transitioned from \w+ to stopping", r"Process timed out waiting to stop, sending KILL signal",
   r"process stopped by llama-swap")
_e("vulkan.version-too-old", "system-too-old", 20, _W,
   f"ggml/src/ggml-vulkan/ggml-vulkan.cpp, {_B} (`ggml_vulkan: Error: Vulkan 1.2 required.`)",
   "the device's Vulkan driver offers an older Vulkan than the build needs (an old driver or "
   "GPU); a sign only, the exit or the next lines decide",
   r"ggml_vulkan: Error: Vulkan 1\.2 required")


ENTRIES = _wordings.entries()
