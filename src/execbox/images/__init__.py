"""Images for the docker backend, built locally (no registry needed).

>>> from execbox.images import ImageSpec, build_image
>>> build_image()                                # the base: Debian + Python
'execbox/base:…'
>>> build_image(ImageSpec(packages=["numpy"]))   # base + a venv with numpy
'execbox/python:…'
"""

from ._build import ImageInfo, build_image, list_images
from ._spec import BASE_ALIAS, ImageSpec, base_tag

__all__ = ["BASE_ALIAS", "ImageInfo", "ImageSpec", "base_tag", "build_image", "list_images"]
