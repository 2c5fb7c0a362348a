"""The reproductions of issue 15 (items 4 and 5): each note, and the secret in it that must never get out.

Secrets are fake: random strings in each provider's shape, AWS's documented
``…EXAMPLE`` key, the classic test card and made-up numbers with valid checksums.
"""

from __future__ import annotations

#: (name, note, the secret inside it)
REPRODUCTIONS: list[tuple[str, str, str]] = [
    # item 4: next to CJK text or "_"
    ("zh_openai", "项目的OpenAI密钥sk-proj-AbCdQx7Lm2Np9Rt4Vw6Yz8Bc已经配置好了。", "sk-proj-AbCdQx7Lm2Np9Rt4Vw6Yz8Bc"),
    ("zh_aws", "运维账号的访问密钥AKIAIOSFODNN7EXAMPLE，备份任务在用。", "AKIAIOSFODNN7EXAMPLE"),
    ("ja_openai", "本番環境のキーはsk-proj-Jp3Kq8Lr1Ms6Nt0Ou5Pv9Qw2Rxです", "sk-proj-Jp3Kq8Lr1Ms6Nt0Ou5Pv9Qw2Rx"),
    ("underscore", "key_sk-proj-Us7Vt2Wq9Xr4Ys1Zt6Au3Bv8Cw", "sk-proj-Us7Vt2Wq9Xr4Ys1Zt6Au3Bv8Cw"),
    ("fullwidth", "密钥：ｓｋ－ｐｒｏｊ－Fw1Gx2Hy3Iz4Ja5Kb6Lc7Md8Ne9", "Fw1Gx2Hy3Iz4Ja5Kb6Lc7Md8Ne9"),
    ("zero_width", "the key is sk-proj-Zw1Xv2\u200bYu3Zt4As5Br6\u200dCq7Dp8", "Yu3Zt4As5Br6"),
    # item 5: formats that were not detected at all
    ("huggingface", "HF token for the eval box: 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",
     "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"),
    ("gitlab", "CI uses glpat-Gl4bK9mP2qR7sT1uV6wX (expires June)", "glpat-Gl4bK9mP2qR7sT1uV6wX"),
    ("groq", "Groq key gsk_Gr0qK3yAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6",
     "gsk_Gr0qK3yAb1Cd2Ef3Gh4Ij5Kl6Mn7"),
    ("npm", "publish with npm_Np4mT0k3nAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8QRs", "npm_Np4mT0k3nAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8QRs"),
    ("sendgrid", "mail key SG.Sg1Ab2Cd3Ef4Gh5Ij6Kl7M.Nn8Op9Qr0St1Uv2Wx3Yz4Ab5Cd6Ef7Gh8Ij9Kl0Mn1Op2Q",
     "Nn8Op9Qr0St1Uv2Wx3Yz4Ab5Cd6Ef7Gh8Ij9Kl0Mn1Op2Q"),
    ("xai", "xai-Xa1Ib2Jc3Kd4Le5Mf6Ng7Oh8Pi9Qj0Rk1Sl2Tm3Un4Vo5Wp6Xq7Yr8Zs9At0Bu1Cv2Dw3Ex4Fy5Gz6Ha7Ib8",
     "Xa1Ib2Jc3Kd4Le5Mf6Ng7Oh8Pi9Qj0Rk1Sl2Tm3Un4"),
    ("google_oauth", "token ya29.a0Go0gLeOaUtH1Ab2Cd3Ef4Gh5Ij6Kl7Mn8 from gcloud",
     "ya29.a0Go0gLeOaUtH1Ab2Cd3Ef4Gh5Ij6Kl7Mn8"),
    ("stripe_webhook", "webhook secret whsec_Wh5eCAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9",
     "whsec_Wh5eCAb1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9"),
    ("twilio", "Twilio SK7f3a9c2e1b4d4e8f9a0b1c2d3e4f5a6b for SMS", "SK7f3a9c2e1b4d4e8f9a0b1c2d3e4f5a6b"),
    ("aws_secret", "our aws secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY for the ci user",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("password_prose", "The database password for prod is hunter2!Secret", "hunter2!Secret"),
    ("password_plain", "the password is swordfish", "swordfish"),
    ("sshpass", "sshpass -p 'Ss7hPa55!word' ssh root@build-01", "Ss7hPa55!word"),
    ("pin", "PIN 4821", "4821"),
    ("zh_alipay", "支付宝登录密码 Abc123456", "Abc123456"),
    ("zh_root", "root口令叫做Qw3rty!9", "Qw3rty!9"),
    ("zh_mobile", "张伟的手机 13812345678，有事打他。", "13812345678"),
    ("card_dots", "company card 4111.1111.1111.1111 expires 09/27", "4111.1111.1111.1111"),
    ("ssn", "Maria's SSN is 219-09-9999 for the tax form.", "219-09-9999"),
    ("iban", "Rent goes to DE89 3704 0044 0532 0130 00 on the 1st.", "3704 0044 0532 0130"),
    ("base64", "k8s data: c2stcHJvai1BYkNkRWZHaElqS2xNbk9wUXJTdFV2V3gxMjM0",
     "c2stcHJvai1BYkNkRWZHaElqS2xNbk9wUXJTdFV2V3gxMjM0"),
    ("split", "The key is sk-proj-Sp1t Ab2C d3Ef 4Gh5 Ij6K l7Mn 8Op9 (split for the slide)", "Ab2C d3Ef 4Gh5"),
]
