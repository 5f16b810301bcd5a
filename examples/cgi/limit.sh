#!/bin/bash
# examples/cgi/limit.sh: a CGI page guarded by frsd, with curl (the shell
# version of limit.py).
#
# Every request acquires one use of FRS_BIZ for its key: the form's `user`
# parameter as "user:NAME", else the client's address as "ip:REMOTE_ADDR".
# Allowed: the page (200). Denied: 429 with frsd's Retry-After. frsd down or
# slower than FRS_TIMEOUT seconds, or a page at FRS_URL that is not frsd's
# answer (a proxy's): FRS_FAIL=open serves the page, FRS_FAIL=closed answers
# 503 with Retry-After: 1. A key frsd refuses: 400;
# any other refusal (an unknown FRS_BIZ), or FRS_FAIL or FRS_TIMEOUT not as
# below: 500.
#
# Settings, from the environment (nginx: fastcgi_param; Apache: SetEnv):
#   FRS_URL      frsd, or the proxy in front of its shards (default http://127.0.0.1:8300)
#   FRS_BIZ      the biz of map.xml (default login)
#   FRS_FAIL     open | closed (default open)
#   FRS_TIMEOUT  seconds (default 0.5)
# Needs curl 7.84 or later (-w '%header{...}'; Debian 12 has 7.88).
url=${FRS_URL:-http://127.0.0.1:8300}
biz=${FRS_BIZ:-login}
fail=${FRS_FAIL:-open}
timeout=${FRS_TIMEOUT:-0.5}

# The page's own settings, checked as limit.py checks them: a timeout of 0
# is no limit to curl (a silent frsd would hold the page for ever), and a
# value curl refuses would end in the fail policy without asking frsd.
if [[ $fail != open && $fail != closed ]] ||
  ! [[ $timeout =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ && ${timeout%%[eE]*} =~ [1-9] ]]; then
  echo "limit.sh: FRS_FAIL must be open or closed and FRS_TIMEOUT a number of seconds above 0" \
    "(FRS_FAIL=$fail FRS_TIMEOUT=$timeout)" >&2
  printf 'Status: 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s\n' \
    "The rate limiter is misconfigured."
  exit 0
fi

# The form's user= value, percent-decoded ('+' is a space, as in HTML forms).
user=
IFS='&' read -r -a pairs <<<"${QUERY_STRING:-}"
for p in "${pairs[@]}"; do
  case $p in
    user=*)
      v=${p#user=}
      # A malformed %-escape is refused, not counted on a made-up name.
      if [[ $v =~ %([^0-9A-Fa-f]|.[^0-9A-Fa-f]|.?$) ]]; then
        printf 'Status: 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s\n' \
          "This request cannot be counted: the user parameter has a bad %-escape."
        exit 0
      fi
      # A NUL (%00) cannot live in a shell string: %b would end the name there
      # and count "a%00x" on user a's key. frsd refuses a control character
      # in a key, and so does this: the same 400.
      if [[ $v =~ %00 ]]; then
        printf 'Status: 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s\n' \
          "This request cannot be counted: the user parameter holds a NUL byte."
        exit 0
      fi
      v=${v//\\/\\\\}   # keep backslashes literal for printf %b
      v=${v//+/ }
      printf -v user '%b' "${v//%/\\x}" 2>/dev/null
      break ;;
  esac
done
if [ -n "$user" ]; then key="user:$user"; else key="ip:${REMOTE_ADDR:-unknown}"; fi

# The one-liner: GET /acquire, every value URL-encoded by curl (-G puts the
# --data-urlencode pairs in the query string, so '+', '&', spaces, quotes and
# UTF-8 reach frsd intact); frsd answers 200 allowed, 429 denied (with
# Retry-After); curl prints 000 when frsd refused the connection or did not
# answer within --max-time. The status line goes last, after the body.
answer=$(curl -s --max-time "$timeout" --max-filesize 65536 -w '\n%{http_code} %header{retry-after}' \
  -G "$url/acquire" --data-urlencode "biz=$biz" --data-urlencode "key=$key")
read -r code retry <<<"${answer##*$'\n'}"
body=${answer%$'\n'*}
# Only frsd's own answer decides: its XML says allowed="1" with a 200 and
# allowed="0" with a 429. A proxy's or a web server's page at FRS_URL (its
# own 200, 429 or 404) is frsd not answering: the fail policy decides.
case $code in
  200) [[ $body == *'<response code="0" allowed="1"'* ]] || code=000 ;;
  429) [[ $body == *'<response code="0" allowed="0"'* ]] || code=000 ;;
  4??) [[ $body == *'<response code="'* ]] || code=000 ;;
esac

page() { printf 'Status: %s\r\n%sContent-Type: text/plain; charset=utf-8\r\n\r\n%s\n' "$1" "$2" "$3"; }

case $code in
  200) page "200 OK" "" "Hello, ${user:-visitor}" ;;
  429) page "429 Too Many Requests" "${retry:+Retry-After: $retry$'\r\n'}" "Too many requests: slow down." ;;
  400) # frsd refused the key itself (too long, a control character): no
       # wait cures it, so not a 429.
       echo "limit.sh: frsd answered $code" >&2
       page "400 Bad Request" "" "This request cannot be counted." ;;
  4??) # any other refusal (an unknown biz): this page's configuration.
       echo "limit.sh: frsd answered $code" >&2
       page "500 Internal Server Error" "" "The rate limiter is misconfigured." ;;
  *)   # no answer (000), not frsd's answer, 5xx: the fail policy decides.
       echo "limit.sh: frsd at $url did not answer (HTTP ${code:-000})" >&2
       if [ "$fail" = closed ]; then
         page "503 Service Unavailable" "Retry-After: 1"$'\r\n' "Try again in a moment."
       else
         page "200 OK" "" "Hello, ${user:-visitor}"
       fi ;;
esac
