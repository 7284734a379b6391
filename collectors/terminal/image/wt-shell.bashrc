
# --- prompt status ---------------------------------------------------------------------------
# After every command, note its exit status, the shell's pid, a sequence number and the working
# directory beside the tmux socket, then signal the tmux channel "prompt". Nothing of this is
# drawn on screen, so the screen is exactly what a person would see.
# The file is rewritten in place (`>|`, whatever noclobber says) with one write, so a full disk
# does not stop it and a reader never sees half a line.
if [ -n "$TMUX" ] && [ -z "$__prompt_hooked" ]; then
  __prompt_hooked=1
  __prompt_seq=0
  __prompt_status() {
    local rc=$?
    __prompt_seq=$((__prompt_seq + 1))
    printf '%s\t%s\t%s\t%s\n' "$rc" "$$" "$__prompt_seq" "$PWD" 2>/dev/null \
      >| "${TMUX%%,*}.status"
    tmux wait-for -S prompt 2>/dev/null
    return $rc
  }
  PROMPT_COMMAND=__prompt_status
  PS1='\u@\h:\w\$ '
  HISTFILE=/dev/null
fi
