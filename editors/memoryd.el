;;; memoryd.el --- re-index Markdown files in memoryd on save  -*- lexical-binding: t; -*-

;;; Commentary:
;; Install: put this file on your `load-path' and add to your init file
;;   (require 'memoryd)
;;   (memoryd-mode 1)
;;
;; Why: the daemon's inotify watcher already indexes a saved file ~0.2 s after
;; Emacs closes it.  This hook matters where inotify does not see the save
;; (network mounts, some containers) and makes the re-index immediate.
;;
;; Contract: never blocks Emacs and never prints anything.  The command is run
;; with `call-process' and destination 0: Emacs does not wait for it, discards
;; its output, and the child survives Emacs exiting.  A missing `memoryd'
;; binary, a daemon that is not running, or a file outside the memory roots
;; all fail quietly.  Remote (TRAMP) files are skipped.

;;; Code:

(require 'seq)

(defgroup memoryd nil
  "Tell the memoryd daemon about saved Markdown files."
  :group 'tools)

(defcustom memoryd-command '("memoryd" "reindex")
  "Program and arguments; the saved file's absolute path is appended.
For a non-default socket: (\"memoryd\" \"reindex\" \"--socket\" \"/path/memoryd.sock\")."
  :type '(repeat string))

(defcustom memoryd-file-regexp "\\.\\(md\\|markdown\\)\\'"
  "Only files whose name matches this trigger a re-index."
  :type 'regexp)

(defcustom memoryd-directories nil
  "When non-nil, only files under these directories trigger a re-index."
  :type '(repeat directory))

(defun memoryd--wanted-p (file)
  "Non-nil when FILE is a local Markdown file inside `memoryd-directories'."
  (and file
       (not (file-remote-p file))
       (string-match-p memoryd-file-regexp file)
       (or (null memoryd-directories)
           (seq-some (lambda (dir) (file-in-directory-p file dir)) memoryd-directories))))

(defun memoryd--real-path (file)
  "FILE with its directory's symlinks resolved, its own name kept.
The daemon matches paths against its roots as configured or resolved, so a
note opened through a symlinked folder is still found; a symlinked note is
re-indexed under its own name."
  (expand-file-name (file-name-nondirectory file)
                    (file-truename (file-name-directory file))))

(defun memoryd-reindex-buffer-file ()
  "Ask memoryd to re-index the current buffer's file, without waiting."
  (let ((file (and buffer-file-name (expand-file-name buffer-file-name))))
    (when (and (memoryd--wanted-p file) memoryd-command (executable-find (car memoryd-command)))
      (setq file (memoryd--real-path file))
      ;; `default-directory' may be a vanished or remote folder; "/" always works.
      (let ((default-directory "/"))
        (ignore-errors
          (apply #'call-process (car memoryd-command) nil 0 nil
                 (append (cdr memoryd-command) (list file))))))))

;;;###autoload
(define-minor-mode memoryd-mode
  "Global minor mode: re-index saved Markdown files in memoryd."
  :global t
  :group 'memoryd
  (if memoryd-mode
      (add-hook 'after-save-hook #'memoryd-reindex-buffer-file)
    (remove-hook 'after-save-hook #'memoryd-reindex-buffer-file)))

(provide 'memoryd)
;;; memoryd.el ends here
