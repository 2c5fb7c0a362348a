" memoryd.vim — tell memoryd to re-index a Markdown file the moment it is saved.
"
" Install: copy to ~/.vim/plugin/ (Vim) or ~/.config/nvim/plugin/ (Neovim),
" or `source /path/to/memoryd.vim` from your vimrc / init.vim.
"
" Why: the daemon's inotify watcher already indexes a saved file ~0.2 s after
" the editor closes it. This hook matters where inotify does not see the save
" (network mounts, some containers) and makes the re-index immediate.
"
" Contract: never blocks the editor and never prints anything. The command runs
" as a background job (Neovim jobstart, Vim 8+ job_start, else a backgrounded
" shell); if memoryd is missing or the daemon is not running, it fails quietly.
"
" Settings (set them before this file is sourced, or any time after):
"   g:memoryd_cmd   the command, as a list; the file's absolute path is appended.
"                   Default ['memoryd', 'reindex']. A non-default socket:
"                   ['memoryd', 'reindex', '--socket', '/path/to/memoryd.sock']
"   g:memoryd_dirs  only files under these folders trigger the hook (absolute
"                   folders, ~ allowed; [] = every *.md / *.markdown). Default [].

if exists('g:loaded_memoryd') || &compatible
  finish
endif
let g:loaded_memoryd = 1

let g:memoryd_cmd = get(g:, 'memoryd_cmd', ['memoryd', 'reindex'])
let g:memoryd_dirs = get(g:, 'memoryd_dirs', [])

" True when path lies under one of g:memoryd_dirs (or when that list is empty).
function! s:wanted(path) abort
  if empty(g:memoryd_dirs)
    return 1
  endif
  for l:dir in g:memoryd_dirs
    " resolve(): buffer names have their folder symlinks resolved, so must the prefix.
    let l:d = fnamemodify(resolve(expand(l:dir)), ':p')
    if l:d !~# '/$'
      let l:d .= '/'
    endif
    if stridx(a:path, l:d) == 0
      return 1
    endif
  endfor
  return 0
endfunction

" Start `g:memoryd_cmd + [path]` in the background; output goes nowhere.
" (Vim and Neovim already resolve folder symlinks in a buffer's full name, so
" the daemon, which matches its roots as configured or resolved, knows it.)
function! MemorydReindex(path) abort
  if empty(g:memoryd_cmd) || !executable(g:memoryd_cmd[0]) || !s:wanted(a:path)
    return
  endif
  let l:argv = g:memoryd_cmd + [a:path]
  if has('nvim')
    " detach: the job outlives a `:wq` (Neovim kills attached jobs on exit).
    silent! call jobstart(l:argv, {'detach': v:true})
  elseif exists('*job_start')
    " stoponexit '': a `:wq` must not kill the re-index it just started.
    silent! call job_start(l:argv, {'in_io': 'null', 'out_io': 'null', 'err_io': 'null', 'stoponexit': ''})
  else
    " Old Vim without +job: let the shell background it so system() returns at once.
    silent! call system(join(map(copy(l:argv), 'shellescape(v:val)')) . ' >/dev/null 2>&1 &')
  endif
endfunction

augroup memoryd
  autocmd!
  autocmd BufWritePost *.md,*.markdown call MemorydReindex(expand('<afile>:p'))
augroup END
