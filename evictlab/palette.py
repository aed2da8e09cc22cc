"""The colour palette: Okabe-Ito (Okabe & Ito 2008) plus shades of it.

It stays distinguishable under the common forms of colour blindness. Policies take their
fixed colour from here (each policy file names its own); :mod:`evictlab.workbench.plots` draws with it.
"""

from __future__ import annotations

#: The Okabe-Ito palette, plus a neutral grey.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "grey": "#999999",
}

#: Darker and lighter Okabe-Ito hues for the policies beyond the palette's eight colours: the
#: hue mixed in sRGB with black (dark 30-40 %, darker 60 %), white (light 70 %) or, for the
#: fifteenth (no shade toward black or white kept apart from the fourteen), another hue. Chosen so
#: that every pair of policy colours stays apart under simulated protanopia, deuteranopia and
#: tritanopia at least as well as the base palette's own closest pair.
OKABE_ITO_SHADES: dict[str, str] = {
    "vermillion_dark": "#954200",  # 30 % black
    "vermillion_darker": "#552600",  # 60 % black
    "bluish_green_darker": "#003F2E",  # 60 % black
    "bluish_green_light": "#B2E2D5",  # 70 % white
    "reddish_purple_dark": "#7A4964",  # 40 % black
    "yellow_sky_blue": "#C2D674",  # yellow with 30 % sky blue
}
