# Installed as /etc/profile.d/argus-path.sh by deploy/ray-image/Dockerfile. Argus starts every
# job as `bash -lc '<command>'`: a login shell, which resets PATH from /etc/profile. This puts
# the image's Python (python3, and torchrun beside it) back in front.
export PATH="/home/ray/anaconda3/bin:$PATH"
