# Injected as the last cell of every page by site/build_site.py (its input hidden): where this page ran.
import datetime as _dt

from d2l_async import config as _config
from d2l_async.devices import describe_machine as _describe_machine

print(f"This page was executed on {_dt.date.today():%d %B %Y} in "
      f"{'quick' if _config.quick_mode() else 'default'} mode, on: {_describe_machine()}.")
