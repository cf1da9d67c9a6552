"""What ``requests.compat`` offers code written against requests: the standard library's URL, cookie
and mapping names under the spellings requests gives them. Nothing here is requestx_client's own."""

from collections import OrderedDict  # noqa: F401
from collections.abc import Callable, Mapping, MutableMapping  # noqa: F401
from http import cookiejar as cookielib  # noqa: F401
from http.cookies import Morsel  # noqa: F401
from io import StringIO  # noqa: F401
from json import JSONDecodeError  # noqa: F401
import json  # noqa: F401
from urllib.parse import (  # noqa: F401
    quote,
    quote_plus,
    unquote,
    unquote_plus,
    urldefrag,
    urlencode,
    urljoin,
    urlparse,
    urlsplit,
    urlunparse,
)
from urllib.request import getproxies, getproxies_environment, parse_http_list, proxy_bypass  # noqa: F401

builtin_str = str
str = str
bytes = bytes
basestring = (str, bytes)
numeric_types = (int, float)
integer_types = (int,)
has_simplejson = False
is_urllib3_1 = False  # no urllib3 underneath: the native core speaks HTTP itself
