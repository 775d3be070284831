// Build-wide switches visible to public headers. AK_DEBUG (set by the build, default off in
// release) turns on the checks that detect double, foreign and interior frees. AK_SECURE (set for
// liballockit-secure only, docs/security.md) turns on canaries, quarantine, encoded free lists,
// randomised slabs and guard pages.
#pragma once

namespace ak {
#if defined(AK_DEBUG) && AK_DEBUG
inline constexpr bool kDebugBuild = true;
#else
inline constexpr bool kDebugBuild = false;
#endif
#if defined(AK_SECURE) && AK_SECURE
inline constexpr bool kSecureBuild = true;
#else
inline constexpr bool kSecureBuild = false;
#endif
}  // namespace ak
