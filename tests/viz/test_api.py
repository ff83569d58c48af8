from __future__ import annotations

import d2l_async.viz as viz

