"""Named unit prefixes and conversions, used only at the edges (YAML, CLI, app).

Rates are decimal (GB/s = 1e9 bytes/s); capacities in GiB are binary, as scipy.constants does.
"""

KILO = 1e3
MEGA = 1e6
GIGA = 1e9
TERA = 1e12
PETA = 1e15

KIBI = 2**10
MEBI = 2**20
GIBI = 2**30
TEBI = 2**40

MICRO = 1e-6
MILLI = 1e-3

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
JOULES_PER_KWH = 3.6e6

BITS_PER_BYTE = 8
