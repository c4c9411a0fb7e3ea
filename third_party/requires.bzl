"""target_compatible_with for targets that need a system library."""

def requires(available):
    """[] when the library was found (@sys_<lib>//:defs.bzl AVAILABLE),
    else a constraint no platform has: the target is skipped."""
    return [] if available else ["//third_party:system_library_missing"]
