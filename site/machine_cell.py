# Injected as the last cell of every page by site/build_site.py (its input hidden): where this page ran.
import datetime as _dt

from d2l_async import config as _config
from d2l_async.devices import describe_machine as _describe_machine, machine as _machine

_here = _machine(sample_s=0.5)
# a busy machine turns timing claims into "can't tell": the page says so beside the machine
_busy = (f" The machine was busy ({_here.usable_cpus - _here.spare_cpus:.1f} of {_here.usable_cpus:g} CPUs with other "
         "work): timing checks on this page may say \"can't tell\" where a quiet machine decides them."
         if _here.spare_cpus < 0.75 * _here.usable_cpus else "")
print(f"This page was executed on {_dt.date.today():%d %B %Y} in "
      f"{'quick' if _config.quick_mode() else 'default'} mode, on: {_describe_machine(_here)}.{_busy}")
