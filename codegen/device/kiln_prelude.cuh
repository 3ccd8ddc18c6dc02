// kiln device prelude: included (as text) at the top of every generated kernel. No toolkit headers.
#pragma once
#define KILN_INF __int_as_float(0x7f800000)
