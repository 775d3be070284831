// Build-wide switches visible to public headers. AK_DEBUG (set by the build, default off in
// release) turns on the checks that detect double, foreign and interior frees.
#pragma once

namespace ak {
#if defined(AK_DEBUG) && AK_DEBUG
inline constexpr bool kDebugBuild = true;
#else
inline constexpr bool kDebugBuild = false;
#endif
}  // namespace ak
